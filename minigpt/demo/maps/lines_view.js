// The line view (maps/lines_view.py): hovering a query token on the left shows only that token's lines; leaving the
// picture shows them all again.
element.addEventListener('mouseover', (event) => {
  const token = event.target.closest && event.target.closest('text.q[data-i]');
  const svg = token && token.closest('svg');
  if (!svg) return;
  svg.querySelectorAll('line').forEach((line) => {
    line.style.display = line.dataset.q === token.dataset.i ? '' : 'none';
  });
});
element.addEventListener('mouseout', (event) => {
  const svg = event.target.closest && event.target.closest('.attn-lines svg');
  if (!svg || (event.relatedTarget && svg.contains(event.relatedTarget))) return;
  const only = svg.dataset.only;  // a token chosen by a click or tap keeps its lines
  svg.querySelectorAll('line').forEach((line) => { line.style.display = !only || line.dataset.q === only ? '' : 'none'; });
});
// Touch and keyboard: a tap or click on a query token keeps only its lines (again: all of them), so nothing here needs
// a hover.
element.addEventListener('click', (event) => {
  const token = event.target.closest && event.target.closest('text.q[data-i]');
  const svg = token && token.closest('svg');
  if (!svg) return;
  const only = svg.dataset.only === token.dataset.i ? '' : token.dataset.i;
  svg.dataset.only = only;
  svg.querySelectorAll('line').forEach((line) => {
    line.style.display = !only || line.dataset.q === only ? '' : 'none';
  });
});

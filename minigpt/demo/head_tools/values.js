// The head tools' results (head_tools/view.py: ablation, Compare, sampled probabilities). Nothing is hover-only: a click
// or tap on a cell or token whose exact value is in its title shows that value in a line under it (.exact-value).
// A loss strip with a row of changes (the ablation's) is scrolled so that the largest rise of the loss is in view: on
// a repeated text it is in the repeated half, off to the right of a narrow strip.
element.addEventListener('click', (event) => {
  const cell = event.target.closest && event.target.closest('td[title], span[title], th[title]');
  showExactValue(element, cell, cell ? cell.title : '');
});
const showRise = () => element.querySelectorAll('.strip').forEach((strip) => {
  const cells = [...strip.querySelectorAll('td[data-change]')];
  const key = cells.map((cell) => cell.dataset.change).join(',') + '|' + strip.textContent;
  const rise = cells.length && cells.reduce((a, b) => (Number(b.dataset.change) > Number(a.dataset.change) ? b : a));
  if (!rise || (strip.dataset.shown === key && rise.classList.contains('largest-rise'))) return;
  strip.dataset.shown = key;
  cells.forEach((cell) => cell.classList.toggle('largest-rise', cell === rise));
  const left = rise.offsetLeft - strip.clientWidth / 2 + rise.offsetWidth / 2;
  strip.scrollLeft = Math.max(0, left);
});
// Gradio morphs a new drawing into the old one: text and attributes change in place, so those are watched too.
new MutationObserver(() => requestAnimationFrame(showRise)).observe(element, {
  childList: true, subtree: true, characterData: true, attributes: true, attributeFilter: ['data-change', 'class'],
});
showRise();

// A click on a token of the strip picks its position (the `pick` event of the gr.HTML); a token is a button
// (tabindex="0", role="button": head_tools/view.py), picked with Enter or Space too.
element.addEventListener('click', (event) => {
  const cell = event.target.closest('[data-position]');
  if (cell) trigger('pick', {position: Number(cell.dataset.position)});
});
element.addEventListener('keydown', (event) => {
  if (event.key !== 'Enter' && event.key !== ' ') return;
  const cell = event.target.closest && event.target.closest('[data-position]');
  if (!cell) return;
  event.preventDefault();
  trigger('pick', {position: Number(cell.dataset.position)});
});

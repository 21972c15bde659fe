// A click on a head's cell of a layer x head table (head_table): that head's map, large (the gr.HTML's `pick` event),
// and the page scrolls to it.
// A cell is a button (tabindex="0", role="button": head_tools/view.py): Enter or Space picks it as a click does.
element.addEventListener('keydown', (event) => {
  if (event.key !== 'Enter' && event.key !== ' ') return;
  const cell = event.target.closest && event.target.closest('[data-layer][data-head]');
  if (!cell) return;
  event.preventDefault();
  cell.dispatchEvent(new MouseEvent('click', {bubbles: true}));
});
element.addEventListener('click', (event) => {
  const cell = event.target.closest('[data-layer][data-head]');
  if (!cell) return;
  trigger('pick', {layer: Number(cell.dataset.layer), head: cell.dataset.head});
  const map = document.querySelector('#attention-head');
  if (map) map.scrollIntoView({behavior: 'smooth', block: 'center'});
});

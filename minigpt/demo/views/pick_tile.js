// Clicking a tile of the grid asks the server for that head, large (the `pick` event of the grid's gr.HTML). A tile
// is a button (tabindex="0", role="button": views/maps.py): Enter or Space on a focused tile opens it as a click does.
const pick = (tile) => {
  element.querySelectorAll('svg.selected').forEach((s) => s.classList.remove('selected'));
  tile.classList.add('selected');
  trigger('pick', {layer: Number(tile.dataset.layer), head: tile.dataset.head});
};
element.addEventListener('click', (event) => {
  const tile = event.target.closest('svg[data-layer]');
  if (tile) pick(tile);
});
element.addEventListener('keydown', (event) => {
  if (event.key !== 'Enter' && event.key !== ' ') return;
  const tile = event.target.closest && event.target.closest('svg[data-layer]');
  if (!tile) return;
  event.preventDefault();  // Space: no page scroll
  pick(tile);
});

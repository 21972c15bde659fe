// Clicking a tile of the grid asks the server for that head, large (the `pick` event of the grid's gr.HTML).
element.addEventListener('click', (event) => {
  const tile = event.target.closest('svg[data-layer]');
  if (!tile) return;
  element.querySelectorAll('svg.selected').forEach((s) => s.classList.remove('selected'));
  tile.classList.add('selected');
  trigger('pick', {layer: Number(tile.dataset.layer), head: tile.dataset.head});
});

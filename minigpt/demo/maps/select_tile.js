// The grid's outlined tile follows the page's selection: run (in the browser only) when the maps' layer or head
// picker changes, whatever moved it (a tile, a map row, the lesson, a link).
(layer, head) => {
  const grid = document.querySelector('#attention-grid');
  if (!grid) return;
  grid.querySelectorAll('svg.selected').forEach((tile) => tile.classList.remove('selected'));
  const tile = grid.querySelector(`svg[data-layer="${layer}"][data-head="${head}"]`);
  if (tile) tile.classList.add('selected');
}

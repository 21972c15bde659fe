// A click on a head's cell of a layer x head table (head_table): that head's map, large (the gr.HTML's `pick` event),
// and the page scrolls to it.
element.addEventListener('click', (event) => {
  const cell = event.target.closest('[data-layer][data-head]');
  if (!cell) return;
  trigger('pick', {layer: Number(cell.dataset.layer), head: cell.dataset.head});
  const map = document.querySelector('#attention-head');
  if (map) map.scrollIntoView({behavior: 'smooth', block: 'center'});
});

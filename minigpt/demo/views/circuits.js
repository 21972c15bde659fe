// The circuits views (views/circuits.py): a click on a head, a cell of a layer x head grid or a node of the
// composition graph, picks it (the gr.HTML's `pick` event: its OV and QK circuits are drawn) and scrolls to them.
element.addEventListener('click', (event) => {
  const picked = event.target.closest('[data-layer][data-head]');
  if (!picked || picked.classList.contains('head-circuit')) return;
  element.querySelectorAll('.node.chosen').forEach((node) => node.classList.remove('chosen'));
  if (picked.classList.contains('node')) picked.classList.add('chosen');
  trigger('pick', {layer: Number(picked.dataset.layer), head: Number(picked.dataset.head)});
  const circuit = document.querySelector('#circuit-head');
  if (circuit) circuit.scrollIntoView({behavior: 'smooth', block: 'start'});
});

// The circuits views (circuits/view.py): a click on a head, a cell of a layer x head grid or a node of the
// composition graph, picks it (the gr.HTML's `pick` event: its OV and QK circuits are drawn) and scrolls to them.
// A click on an estimated cell (patching at GPT-2's size) asks for its exact value (the `exact` event).
element.addEventListener('click', (event) => {
  const estimated = event.target.closest('[data-cell]');
  if (estimated) {
    estimated.classList.add('asked');
    trigger('exact', {cell: estimated.dataset.cell});
    return;
  }
  const picked = event.target.closest('[data-layer][data-head]');
  if (!picked || picked.classList.contains('head-circuit')) return;
  element.querySelectorAll('.node.chosen').forEach((node) => node.classList.remove('chosen'));
  if (picked.classList.contains('node')) picked.classList.add('chosen');
  trigger('pick', {layer: Number(picked.dataset.layer), head: Number(picked.dataset.head)});
  const circuit = document.querySelector('#circuit-head');
  if (circuit) circuit.scrollIntoView({behavior: 'smooth', block: 'start'});
});

// A click on a token of the strip picks its position (the `pick` event of the gr.HTML).
element.addEventListener('click', (event) => {
  const cell = event.target.closest('[data-position]');
  if (cell) trigger('pick', {position: Number(cell.dataset.position)});
});

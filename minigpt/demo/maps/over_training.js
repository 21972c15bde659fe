// The chosen head over training (maps/view.py over_training_html): a click on a step's map, or Enter or Space on it,
// shows the page at that step (this gr.HTML's event 'go' with {model: "name@N"}, or the final model's name).
element.addEventListener('click', (event) => {
  const step = event.target.closest && event.target.closest('.step-map[data-model]');
  if (step) trigger('go', {model: step.dataset.model});
});
element.addEventListener('keydown', (event) => {
  if (event.key !== 'Enter' && event.key !== ' ') return;
  const step = event.target.closest && event.target.closest('.step-map[data-model]');
  if (!step || step !== event.target) return;
  event.preventDefault();
  trigger('go', {model: step.dataset.model});
});
// "Follow head L.H", the head that changes most across the snapshots: the page's selection moves to it (`pick`).
element.addEventListener('click', (event) => {
  const follow = event.target.closest && event.target.closest('button.follow[data-layer]');
  if (follow) trigger('pick', {layer: Number(follow.dataset.layer), head: follow.dataset.head});
});

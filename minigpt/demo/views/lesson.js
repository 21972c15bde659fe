// The lesson's view (views/lesson.py): a click on a box of the block diagram opens the lesson step that explains it
// (this gr.HTML's event 'go' with {step}); a click on a head's cell in the head roles opens that head's map, large
// (the event 'pick' with {layer, head}, as pick_head.js does for the head tools).
element.addEventListener('click', (event) => {
  const box = event.target.closest('.diagram [data-lesson]');
  if (box) {
    event.stopPropagation();
    trigger('go', {step: Number(box.dataset.lesson)});
    return;
  }
  const cell = event.target.closest('[data-layer][data-head]');
  if (cell && cell.closest('[data-step="roles"][data-pick]')) {  // the roles of the model shown
    trigger('pick', {layer: Number(cell.dataset.layer), head: cell.dataset.head});
    const map = document.querySelector('#attention-head');
    if (map) map.scrollIntoView({behavior: 'smooth', block: 'center'});
  }
});

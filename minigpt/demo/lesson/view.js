// The lesson's view (lesson/view.py): a click on a box of the block diagram opens the lesson step that explains it
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
// Keyboard and touch: the diagram's boxes and the head roles' cells are buttons (tabindex="0", role="button", set
// here on each drawing), opened with Enter or Space as with a click; a click or tap on a number (its exact value in
// its title, shown on hover) shows that value in a line under the pointer too (.exact-value).
const BUTTONS = '.diagram [data-lesson], [data-step="roles"][data-pick] [data-layer][data-head]';
const buttons = () => element.querySelectorAll(BUTTONS).forEach((button) => {
  if (button.hasAttribute('tabindex')) return;
  button.setAttribute('tabindex', '0');
  button.setAttribute('role', 'button');
});
// Gradio morphs a new drawing into the old one: a box kept takes the new attributes (no tabindex), so attribute
// changes are watched too (setting tabindex here calls it once more, then nothing is left to set).
new MutationObserver(buttons).observe(element, {childList: true, subtree: true, attributes: true,
                                                attributeFilter: ['tabindex', 'data-lesson', 'data-layer']});
buttons();
element.addEventListener('keydown', (event) => {
  if (event.key !== 'Enter' && event.key !== ' ') return;
  const button = event.target.closest && event.target.closest(BUTTONS);
  if (!button || button !== event.target) return;
  event.preventDefault();
  button.dispatchEvent(new MouseEvent('click', {bubbles: true}));
});
element.addEventListener('click', (event) => {
  const number = event.target.closest && event.target.closest('.n[title]');
  showExactValue(element, number, number ? `exact value: ${number.title}` : '');
});
// Pictures first: the lesson's numbers are colour squares until "Show numbers" (lesson/view.py digits_switch). The
// choice is this script's, put back on each drawing (Gradio morphs a new step into the old one, resetting classes).
let showDigits = false;
const digits = () => element.querySelectorAll('.lesson').forEach((lesson) => {
  if (lesson.classList.contains('digits') !== showDigits) lesson.classList.toggle('digits', showDigits);
  lesson.querySelectorAll('.digits-switch').forEach((button) => {
    const label = showDigits ? 'Hide numbers' : 'Show numbers';
    if (button.textContent !== label) button.textContent = label;
    if (button.getAttribute('aria-pressed') !== String(showDigits)) button.setAttribute('aria-pressed', String(showDigits));
  });
});
element.addEventListener('click', (event) => {
  if (!(event.target.closest && event.target.closest('.digits-switch'))) return;
  showDigits = !showDigits;
  digits();
});
new MutationObserver(digits).observe(element, {childList: true, subtree: true, attributes: true,
                                               attributeFilter: ['class']});
digits();

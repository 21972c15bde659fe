// Shared by lesson/view.js and values.js (prepended to each): nothing is hover-only. `showExactValue(element, target,
// text)` shows `text` (a number's exact value, from its title) in one line under `target`; with no target, hides it.
const showExactValue = (element, target, text) => {
  let line = element.querySelector('.exact-value');
  if (!target) { if (line) line.hidden = true; return; }
  if (!line) {
    line = document.createElement('div');
    line.className = 'exact-value';
    line.setAttribute('role', 'status');
    if (getComputedStyle(element).position === 'static') element.style.position = 'relative';  // the line's origin
    element.appendChild(line);
  }
  const box = target.getBoundingClientRect(), origin = element.getBoundingClientRect();
  line.textContent = text;
  line.hidden = false;
  line.style.left = `${box.left - origin.left}px`;
  line.style.top = `${box.bottom - origin.top + 4}px`;
};

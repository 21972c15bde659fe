// #exercise-reveal (hidden): where the page draws each graded answer (exercises/view.py reveal_html). Each new grade
// is kept in the browser (localStorage 'minigpt-exercises', by question id, with its reveal's HTML) and handed to the
// cards showing that question (the DOM event 'exercise-graded', view.js), wherever they are on the page. An answer
// that could not be graded is handed on with its message, and not kept.
const STORE = 'minigpt-exercises';
const MAX_KEPT_HTML = 60000;  // characters of one reveal kept for after a reload; a larger one keeps its words only
const keep = (result) => {
  let kept;
  try {
    kept = JSON.parse(localStorage.getItem(STORE) || '{}');
  } catch (error) {
    kept = {};
  }
  if (!kept || typeof kept.results !== 'object' || !kept.results) kept = {results: {}};
  kept.results[result.id] = {...result, html: result.html.length <= MAX_KEPT_HTML ? result.html : ''};
  try {
    localStorage.setItem(STORE, JSON.stringify(kept));
  } catch (error) {  // full: keep the words, drop every picture
    Object.values(kept.results).forEach((r) => { r.html = ''; });
    localStorage.setItem(STORE, JSON.stringify(kept));
  }
};
const handOn = () => {
  const graded = element.querySelector('.ex-graded[data-id]');
  if (!graded || graded.dataset.handed === graded.dataset.asked) return;
  graded.dataset.handed = graded.dataset.asked;
  const html = graded.outerHTML;
  let result;
  if (graded.dataset.result) {
    result = {...JSON.parse(graded.dataset.result), html, at: new Date().toISOString()};
    keep(result);
  } else {
    result = {id: graded.dataset.id, error: true, html};
  }
  document.dispatchEvent(new CustomEvent('exercise-graded', {detail: result}));
};
new MutationObserver(handOn).observe(element, {childList: true, subtree: true, attributes: true,
                                               attributeFilter: ['data-asked', 'data-id']});
handOn();

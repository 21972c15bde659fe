// On the current-text line (`current_html`): every view drawn for another (model, text) than the one shown now, i.e.
// every `.view-of` whose data-view is not the line's, is greyed with a note naming the text it belongs to; a view of
// the model alone (data-model-view: the Head Finder, measured on the model's corpus) only when another model is shown.
// A mutation observer re-checks after every change of the page, so a result that arrives late is marked too.
const mark = () => {
  const now = element.querySelector('.current-view');
  const key = now ? now.dataset.view : '';
  const model = now ? now.dataset.model : '';
  document.querySelectorAll('.view-of').forEach((view) => {
    const ofModel = view.dataset.modelView !== undefined;
    const stale = ofModel ? view.dataset.modelView !== model : view.dataset.view !== key;
    view.classList.toggle('stale', stale);
    let note = view.querySelector(':scope > .stale-note');
    if (!stale) { if (note) note.remove(); return; }
    if (!note) { note = document.createElement('p'); note.className = 'stale-note'; view.prepend(note); }
    const text = ofModel
      ? `Out of date: this was measured on ${view.dataset.label}, not on the model shown now. Run it again.`
      : `Out of date: this was computed for ${view.dataset.label}, not for the text shown now. ` +
        'Run it again to see the current text.';
    if (note.textContent !== text) note.textContent = text;
  });
};
let queued = false;
new MutationObserver(() => {
  if (queued) return;
  queued = true;
  requestAnimationFrame(() => { queued = false; mark(); });
}).observe(document.body, {childList: true, subtree: true, attributes: true, attributeFilter: ['data-view']});
mark();

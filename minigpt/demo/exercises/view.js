// The exercise cards of this element (exercises/view.py card_html: the Exercises section's set, lesson step 13's
// question). The learner answers first: a head of the grid, one of the choices (buttons: a click, a tap, Enter or
// Space), a number or a circuit (Enter in the box checks it); Check fires this gr.HTML's event 'answer' with {id, model, text,
// answer, asked}, whose grade is drawn in #exercise-reveal and handed back here by reveal.js (the DOM event
// 'exercise-graded'). Progress stays in the browser (localStorage 'minigpt-exercises': each question's result by id)
// and each card shows its reveal again after a reload. The set's header counts what was answered and right, downloads
// the summary as a small JSON a teacher can collect, shows the link that opens the same set, and clears the answers.
const STORE = 'minigpt-exercises';
const stored = () => {
  try {
    const kept = JSON.parse(localStorage.getItem(STORE) || '{}');
    return kept && typeof kept.results === 'object' && kept.results ? kept : {results: {}};
  } catch (error) {
    return {results: {}};
  }
};
const cards = () => [...element.querySelectorAll('.exercise[data-id]')];
const show = (card, result) => {  // a card's reveal, from a grade just made or kept from before
  const slot = card.querySelector('.ex-reveal');
  if (!slot) return;
  card.dataset.shown = 'yes';  // restore() leaves it alone now: a refusal stays in place of the answer kept before
  slot.innerHTML = result.html || '';
  if (!result.html && result.explanation) {  // kept without its picture: the words alone
    const line = document.createElement('p');
    line.textContent = `${result.correct ? 'Right' : 'Not quite'}: you said ${result.answer}; the model: ${result.truth}. `
      + result.explanation;
    slot.appendChild(line);
  }
  card.classList.toggle('answered', !result.error);
  card.classList.toggle('right', !!result.correct && !result.error);
  card.classList.toggle('wrong', !result.correct && !result.error);
  if (result.error) return;
  card.querySelectorAll('[data-answer]').forEach((button) => {
    button.setAttribute('aria-pressed', String(button.dataset.answer === String(result.answer)));
  });
  const box = card.querySelector('input.ex-number, input.ex-circuit');
  if (box && box.value === '') box.value = result.answer;
  const asked = card.closest('.ex-asked-first');  // a view folded under its question (the walk): unfolded now
  const walk = asked && asked.querySelector('details.ex-after');
  if (walk) walk.open = true;
};
const progress = () => {
  const root = element.querySelector('.exercises');
  const line = root && root.querySelector('.ex-progress');
  if (!line) return;
  const results = stored().results, all = cards();
  const done = all.filter((card) => results[card.dataset.id]);
  const right = done.filter((card) => results[card.dataset.id].correct);
  const text = `${done.length} of ${all.length} answered, ${right.length} right.`;
  if (line.textContent !== text) line.textContent = text;
};
const restore = () => {  // each drawing: the answers kept in this browser
  const results = stored().results;
  cards().forEach((card) => {
    const result = results[card.dataset.id];
    if (result && !card.dataset.shown) show(card, result);
  });
  progress();
};
new MutationObserver(restore).observe(element, {childList: true, subtree: true});
restore();
document.addEventListener('exercise-graded', (event) => {
  cards().filter((card) => card.dataset.id === event.detail.id).forEach((card) => show(card, event.detail));
  progress();
});
const answerOf = (card) => {
  if (card.dataset.kind === 'number') return (card.querySelector('input.ex-number') || {}).value || '';
  if (card.dataset.kind === 'circuit') return ((card.querySelector('input.ex-circuit') || {}).value || '').trim();
  return card.dataset.chosen || '';
};
const check = (card) => {
  const answer = answerOf(card), slot = card.querySelector('.ex-reveal');
  if (answer === '') {
    slot.textContent = {number: 'Type your prediction first.', circuit: 'Write your circuit first.'}[card.dataset.kind]
      || 'Pick your answer first.';
    return;
  }
  slot.textContent = 'Checking…';
  trigger('answer', {id: card.dataset.id, model: card.dataset.model, text: card.dataset.text, answer,
                     asked: String(Date.now())});
};
const summary = () => {  // what a teacher collects: no pictures, no explanations
  const root = element.querySelector('.exercises'), results = stored().results;
  const questions = cards().map((card) => {
    const result = results[card.dataset.id];
    const base = {id: card.dataset.id, kind: card.dataset.kind, type: card.dataset.type, model: card.dataset.model,
                  text: card.dataset.text, answered: !!result};
    return result ? {...base, answer: result.answer, truth: result.truth, correct: result.correct, at: result.at} : base;
  });
  const name = (root.querySelector('input.ex-name') || {}).value || '';
  return {summary: 'minigpt-exercises', learner: name.slice(0, 80), set: root.dataset.title,
          link: new URL(root.dataset.link, location.href).href, exported: new Date().toISOString(),
          answered: questions.filter((q) => q.answered).length, right: questions.filter((q) => q.correct).length,
          questions};
};
const download = () => {
  const blob = new Blob([JSON.stringify(summary(), null, 1)], {type: 'application/json'});
  const link = document.createElement('a');
  link.href = URL.createObjectURL(blob);
  link.download = 'minigpt-exercises-summary.json';
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
};
const classLink = (root) => {
  const box = root.querySelector('input.ex-link-box');
  box.value = new URL(root.dataset.link, location.href).href;
  box.hidden = false;
  box.select();
  if (navigator.clipboard) navigator.clipboard.writeText(box.value).catch(() => {});
};
const clear = () => {
  const kept = stored();
  cards().forEach((card) => {
    delete kept.results[card.dataset.id];
    card.classList.remove('answered', 'right', 'wrong');
    card.querySelector('.ex-reveal').innerHTML = '';
    card.querySelectorAll('[data-answer]').forEach((b) => b.setAttribute('aria-pressed', 'false'));
    delete card.dataset.chosen;
  });
  localStorage.setItem(STORE, JSON.stringify(kept));
  progress();
};
element.addEventListener('click', (event) => {
  const target = event.target.closest ? event.target : event.target.parentElement;
  const picked = target.closest('.exercise [data-answer]');
  if (picked) {
    const card = picked.closest('.exercise');
    card.querySelectorAll('[data-answer]').forEach((b) => b.setAttribute('aria-pressed', String(b === picked)));
    card.dataset.chosen = picked.dataset.answer;
    return;
  }
  const checked = target.closest('.exercise .ex-check');
  if (checked) return check(checked.closest('.exercise'));
  const root = target.closest('.exercises');
  if (!root) return;
  if (target.closest('.ex-download')) download();
  else if (target.closest('.ex-copy-link')) classLink(root);
  else if (target.closest('.ex-clear')) clear();
});
element.addEventListener('keydown', (event) => {
  if (event.key !== 'Enter' || !event.target.matches || !event.target.matches('input.ex-number, input.ex-circuit')) {
    return;
  }
  event.preventDefault();
  check(event.target.closest('.exercise'));
});

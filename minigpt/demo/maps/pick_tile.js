// Clicking a tile of the grid asks the server for that head, large (the `pick` event of the grid's gr.HTML). A tile
// is a button (tabindex="0", role="button": maps/view.py): Enter or Space on a focused tile opens it as a click does.
// The enlarged map is further down the page (under the lesson): once it shows the picked head, the page scrolls to it,
// it is outlined for a moment, and the keyboard's focus moves onto it (its rows are the next Tab, not 40 away).
const shown = (layer, head) => {
  const figure = document.querySelector('#attention-head figure[data-layer]');
  return figure && figure.dataset.layer === String(layer) && figure.dataset.head === String(head) ? figure : null;
};
const reveal = (layer, head, tries = 0) => {
  const figure = shown(layer, head);
  if (!figure) {
    if (tries < 200) setTimeout(() => reveal(layer, head, tries + 1), 50);  // the server's answer: 10 s at most
    return;
  }
  const large = document.querySelector('#attention-head');
  large.scrollIntoView({behavior: 'smooth', block: 'start'});
  large.classList.add('cue');
  setTimeout(() => large.classList.remove('cue'), 1600);
  const target = figure.querySelector('[tabindex]') || figure;
  if (target.focus) target.focus({preventScroll: true});
};
const pick = (tile) => {
  element.querySelectorAll('svg.selected').forEach((s) => s.classList.remove('selected'));
  tile.classList.add('selected');
  trigger('pick', {layer: Number(tile.dataset.layer), head: tile.dataset.head});
  reveal(tile.dataset.layer, tile.dataset.head);
};
element.addEventListener('click', (event) => {
  const tile = event.target.closest('svg[data-layer]');
  if (tile) pick(tile);
});
element.addEventListener('keydown', (event) => {
  if (event.key !== 'Enter' && event.key !== ' ') return;
  const tile = event.target.closest && event.target.closest('svg[data-layer]');
  if (!tile) return;
  event.preventDefault();  // Space: no page scroll
  pick(tile);
});

// The enlarged maps (#attention-head, drawn by head_html). Hover: the exact weight under the pointer, read from the
// server one query row at a time (server.attention_row) and kept per row. Wheel or the zoom buttons: zoom around the
// pointer (or the centre); drag: pan; each asks the server for the visible part (server.attention_window).
// Hooks for other views, kept stable: .attn-large[data-model][data-text][data-view][data-tokens] is the text shown,
// figure[data-layer][data-head] one map, its svg[data-row][data-col][data-size] the window shown (queries row .. row +
// size, keys col .. col + size). A click on a map (no drag) selects the query row under the pointer: it sets
// data-query on .attn-large, outlines that row (rect.row-mark, as the server draws it), fires this gr.HTML's event
// 'query' with {layer, head, query} (`large.query(fn, ...)`, read as the event's attributes) and a bubbling DOM CustomEvent
// 'attention-query' with the same detail; under the maps it then says why the head looks at that cell's key
// (server.attention_why_html, showWhy).
let drag = null, hovered = '', generation = 0, lastWheel = 0;
const cellAt = (event) => {
  const figure = event.target.closest && event.target.closest('.attn-large figure[data-layer]');
  const image = figure && figure.querySelector('image.heat');
  if (!image) return null;
  const w = figure.querySelector('svg').dataset, box = image.getBoundingClientRect();
  const fx = (event.clientX - box.left) / box.width, fy = (event.clientY - box.top) / box.height;
  if (!(fx >= 0 && fy >= 0 && fx < 1 && fy < 1)) return null;
  const row = Number(w.row), col = Number(w.col), size = Number(w.size);
  return {figure, box, fx, fy, row, col, size, q: row + Math.floor(fy * size), k: col + Math.floor(fx * size)};
};
const shown = (figure) => {
  const root = figure.closest('.attn-large');
  return {root, model: root.dataset.model, text: root.dataset.text, layer: Number(figure.dataset.layer),
          head: figure.dataset.head};
};
// Gradio updates this element in place when another text is shown: what is kept here is kept per text (data-view:
// its model and token ids), and an answer is used only while its text is still the one shown.
const tokensOf = (root) => {
  if (root._tokensKey !== root.dataset.view) {
    root._tokens = JSON.parse(root.dataset.tokens);
    root._tokensKey = root.dataset.view;
  }
  return root._tokens;
};
const rows = new Map();
const rowOf = (figure, query) => {
  const {root, ...asked} = shown(figure);
  const key = `${root.dataset.view}|${asked.layer}|${asked.head}|${query}`;
  if (rows.size > 4096) rows.clear();
  if (!rows.has(key)) rows.set(key, server.attention_row({...asked, query}));
  return rows.get(key);
};
const tip = (event, text) => {
  const root = element.querySelector('.attn-large'), box = root && root.querySelector('.attn-tip');
  if (!box) return;
  box.hidden = text === null;
  if (text === null) return;
  const origin = root.getBoundingClientRect();
  box.textContent = text;
  box.style.left = (event.clientX - origin.left + 14) + 'px';
  box.style.top = (event.clientY - origin.top + 14) + 'px';
};
const markRows = (root) => {  // the selected query's row outlined in each map, where the window shows it
  const query = root.dataset.query === '' ? NaN : Number(root.dataset.query);
  root.querySelectorAll('figure[data-layer] svg').forEach((svg) => {
    const image = svg.querySelector('image.heat'), row = Number(svg.dataset.row), size = Number(svg.dataset.size);
    let mark = svg.querySelector('rect.row-mark');
    if (!(query >= row && query < row + size)) { if (mark) mark.remove(); return; }
    if (!mark) {
      mark = document.createElementNS('http://www.w3.org/2000/svg', 'rect');
      Object.entries({class: 'row-mark', fill: 'none', stroke: '#f97316', 'stroke-width': 2, 'pointer-events': 'none'})
        .forEach(([name, value]) => mark.setAttribute(name, value));
      svg.appendChild(mark);
    }
    const cell = Number(image.getAttribute('height')) / size;
    mark.setAttribute('x', image.getAttribute('x'));
    mark.setAttribute('y', Number(image.getAttribute('y')) + (query - row) * cell);
    mark.setAttribute('width', image.getAttribute('width'));
    mark.setAttribute('height', cell);
  });
};
const showWindow = (root, row, col, size) => {
  const mine = ++generation, key = root.dataset.view, query = root.dataset.query;
  root.querySelectorAll('figure[data-layer]').forEach((figure) => {
    const {root: _, ...asked} = shown(figure);
    server.attention_window({...asked, row: Math.round(row), col: Math.round(col), size: Math.round(size), query})
      .then((body) => { if (mine === generation && root.dataset.view === key) figure.innerHTML = body; });
  });
};
const zoom = (cell, factor) => {  // the point under the pointer stays where it is
  const size = cell.size * factor;
  showWindow(cell.figure.closest('.attn-large'), cell.row + cell.fy * (cell.size - size),
             cell.col + cell.fx * (cell.size - size), size);
};
element.addEventListener('mousemove', (event) => {
  if (drag) {
    const image = drag.cell.figure.querySelector('image.heat');
    image.setAttribute('transform', `translate(${event.clientX - drag.x} ${event.clientY - drag.y})`);
    return;
  }
  const cell = cellAt(event);
  if (!cell) { hovered = ''; tip(event, null); return; }
  const root = cell.figure.closest('.attn-large');
  const tokens = tokensOf(root), key = root.dataset.view;
  const label = `query ${cell.q} "${tokens[cell.q]}" -> key ${cell.k} "${tokens[cell.k]}": `;
  if (cell.k > cell.q) { tip(event, label + 'masked (a future token)'); return; }
  const id = hovered = `${key}|${cell.figure.dataset.layer}|${cell.figure.dataset.head}|${cell.q}|${cell.k}`;
  tip(event, label + '…');
  rowOf(cell.figure, cell.q)
    .then((row) => {
      if (hovered !== id) return;
      tip(event, label + (row.view === key ? row.weights[cell.k].toPrecision(6) : '(another text: hover again)'));
    })
    .catch(() => {
      rows.delete(`${key}|${cell.figure.dataset.layer}|${cell.figure.dataset.head}|${cell.q}`);  // ask again next time
      if (hovered === id) tip(event, label + '(could not read the weight: hover again)');
    });
});
element.addEventListener('mouseleave', (event) => { hovered = ''; tip(event, null); });
element.addEventListener('wheel', (event) => {
  const cell = cellAt(event);
  if (!cell) return;
  event.preventDefault();
  if (event.timeStamp - lastWheel < 150) return;  // a trackpad sends a burst of small steps: one zoom per burst
  lastWheel = event.timeStamp;
  zoom(cell, event.deltaY < 0 ? 0.5 : 2);
}, {passive: false});
element.addEventListener('mousedown', (event) => {
  const cell = cellAt(event);
  if (!cell || event.button !== 0) return;
  event.preventDefault();  // no text selection, no image drag
  drag = {cell, x: event.clientX, y: event.clientY};
  tip(event, null);
});
window.addEventListener('mouseup', (event) => {
  if (!drag) return;
  const {cell, x, y} = drag, dx = event.clientX - x, dy = event.clientY - y;
  drag = null;
  const root = cell.figure.closest('.attn-large');
  if (Math.abs(dx) + Math.abs(dy) < 4) {  // a click: select the query row under the pointer
    cell.figure.querySelector('image.heat').removeAttribute('transform');
    showCell(cell.figure, cell.q, cell.k);  // a tap or click shows the exact weight too: nothing is hover-only
    choose(cell.figure, cell.q);
    showWhy(cell.figure, cell.q, cell.k);
    return;
  }
  const perPixel = cell.size / cell.box.width;
  showWindow(root, cell.row - dy * perPixel, cell.col - dx * perPixel, cell.size);
});
element.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-zoom]');
  const root = button && button.closest('.attn-large');
  const svg = root && root.querySelector('figure[data-layer] svg');
  if (!svg) return;
  const w = svg.dataset, cell = {figure: svg.closest('figure'), fx: 0.5, fy: 0.5, row: Number(w.row),
                                 col: Number(w.col), size: Number(w.size)};
  if (button.dataset.zoom === 'all') showWindow(root, 0, 0, tokensOf(root).length);
  else zoom(cell, button.dataset.zoom === 'in' ? 0.5 : 2);
});
// Keyboard and touch: nothing here is hover-only. A click or tap on a cell shows its exact weight in the line under
// the maps (.attn-value). Each map is a button (tabindex="0", maps/view.py): Up and Down move the query row, Left and
// Right the key, each showing that cell's weight; Enter or Space chooses the row's query token, as a click does.
function choose(figure, query) {
  const root = figure.closest('.attn-large');
  const detail = {layer: Number(figure.dataset.layer), head: figure.dataset.head, query};
  root.dataset.query = query;
  markRows(root);
  trigger('query', detail);
  root.dispatchEvent(new CustomEvent('attention-query', {detail, bubbles: true}));
}
// Why the head looks there (maps/why_view.py, under the maps): asked of the server for the clicked cell, drawn while
// its text is still the one shown and no other cell was clicked since. A masked cell or the layer's average: a line.
let whyAsked = 0;
function showWhy(figure, q, k) {
  const root = figure.closest('.attn-large'), box = root.querySelector('.attn-why-box');
  if (!box) return;
  const {root: _, ...asked} = shown(figure), mine = ++whyAsked, key = root.dataset.view;
  if (k > q) { box.innerHTML = ''; return; }
  box.textContent = `Why ${asked.layer}.${asked.head} looks from query ${q} at key ${k}: …`;
  server.attention_why_html({...asked, query: q, key: k})
    .then((body) => { if (mine === whyAsked && root.dataset.view === key) box.innerHTML = body; })
    .catch(() => { if (mine === whyAsked) box.textContent = 'Could not say why: click the cell again.'; });
}
// The lesson's softmax step (lesson/steps_view.py why_keys): a key's button asks why of the enlarged map of the same
// head (the page's one selection), and brings the answer into view.
if (!window.whyKeysListening) {
  window.whyKeysListening = true;
  document.addEventListener('click', (event) => {
    const button = event.target.closest && event.target.closest('button[data-why-key]');
    if (!button) return;
    const {layer, head, query, whyKey} = button.dataset;
    const figure = document.querySelector(`#attention-head figure[data-layer="${layer}"][data-head="${head}"]`);
    const status = button.parentElement.querySelector('.why-status');
    if (!figure) { if (status) status.textContent = `Show head ${layer}.${head} in the maps to ask why.`; return; }
    if (status) status.textContent = '';
    showWhy(figure, Number(query), Number(whyKey));
    figure.closest('.attn-large').querySelector('.attn-why-box').scrollIntoView({block: 'nearest'});
  });
}
function showCell(figure, q, k) {
  const root = figure.closest('.attn-large'), line = root.querySelector('.attn-value');
  if (!line) return;
  const tokens = tokensOf(root), key = root.dataset.view, caption = figure.querySelector('figcaption');
  const name = caption ? caption.firstChild.textContent.trim() : '';
  const label = `${name}: query ${q} "${tokens[q]}" -> key ${k} "${tokens[k]}": `;
  figure._cell = {q, k};
  if (k > q) { line.textContent = label + 'masked (a future token)'; return; }
  line.textContent = label + '…';
  rowOf(figure, q)
    .then((row) => {
      const still = figure._cell && figure._cell.q === q && figure._cell.k === k && root.dataset.view === key;
      if (still && row.view === key) line.textContent = label + row.weights[k].toPrecision(6);
    })
    .catch(() => { line.textContent = label + '(could not read the weight: try again)'; });
}
element.addEventListener('keydown', (event) => {
  const svg = event.target.closest && event.target.closest('.attn-large figure[data-layer] svg');
  if (!svg) return;
  const figure = svg.closest('figure'), root = figure.closest('.attn-large'), last = tokensOf(root).length - 1;
  const query = root.dataset.query === '' ? last : Number(root.dataset.query);
  const cell = figure._cell || {q: query, k: query};
  const moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1]};
  if (event.key in moves) {
    event.preventDefault();
    const [dq, dk] = moves[event.key], clamp = (v) => Math.max(0, Math.min(last, v));
    const q = clamp(cell.q + dq), k = Math.min(q, clamp(cell.k + dk));
    showCell(figure, q, k);
    root.dataset.query = q;  // outlined, not yet chosen: Enter chooses it
    markRows(root);
  } else if (event.key === 'Enter' || event.key === ' ') {
    event.preventDefault();
    choose(figure, cell.q);
    showWhy(figure, cell.q, cell.k);
  }
});
// The row picker (maps/view.py row_picker): a tap on a token's button chooses its row's query, in the chosen head's
// map (the first figure), as a tap on the row does.
element.addEventListener('click', (event) => {
  const button = event.target.closest && event.target.closest('.row-picker button[data-query]');
  if (!button) return;
  const root = button.closest('.attn-large'), figure = root && root.querySelector('figure[data-layer]');
  if (!figure) return;
  root.querySelectorAll('.row-picker .chosen').forEach((b) => b.classList.remove('chosen'));
  button.classList.add('chosen');
  choose(figure, Number(button.dataset.query));
});

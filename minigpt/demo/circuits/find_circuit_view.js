// The circuit found (circuits/find_circuit_view.py). The slider (an <input type=range>: keyboard and touch) picks how many of
// the top edges to keep, one position per k the server measured: the graph shows those edges (less the ones into
// parts nothing kept reads, as the answer lists them), the nodes they touch, the q/k/v ports they enter, and the
// faithfulness measured at that k, all from the answer's numbers: no call. A point of the curve moves the slider there.
// A head is a button: a click (Enter, Space) moves the page's selection to it (the gr.HTML's `pick` event).
const dataOf = (root) => JSON.parse(root.dataset.found);

const redraw = (root, index) => {
  const data = dataOf(root);
  const point = data.curve[index];
  const unread = new Set(point.unread);
  const used = new Set();
  const entered = new Set();
  root.querySelectorAll('path.edge').forEach((edge) => {
    const rank = Number(edge.dataset.rank);
    const shown = rank < point.k && !unread.has(rank);
    edge.classList.toggle('hidden', !shown);
    if (!shown) return;
    used.add(edge.dataset.sender);
    used.add(edge.dataset.receiver);
    if (edge.dataset.input) entered.add(`${edge.dataset.receiver} ${edge.dataset.input}`);
  });
  root.querySelectorAll('.node').forEach((node) => {
    node.classList.toggle('in', used.has(node.dataset.name));
    node.classList.toggle('out', !used.has(node.dataset.name));
  });
  root.querySelectorAll('text.port').forEach((port) => port.classList.toggle('hidden', !entered.has(port.dataset.port)));
  root.querySelectorAll('circle.point').forEach((p) => p.classList.toggle('current', Number(p.dataset.index) === index));
  const readout = root.querySelector('.readout');
  readout.querySelector('.k b').textContent = point.k;
  readout.querySelector('.kept').textContent = point.kept_edges;
  readout.querySelector('.heads').textContent = point.heads.length;
  readout.querySelector('.faith').textContent = point.faithfulness.toFixed(3);
  const bar = readout.querySelector('.faith-bar');
  bar.querySelector('span').style.width = `${Math.max(0, Math.min(1, point.faithfulness)) * 100}%`;
  bar.title = `faithfulness ${point.faithfulness.toFixed(3)}`;
  const slider = root.querySelector('input.keep-edges');
  slider.value = index;
  slider.setAttribute('aria-valuetext', `top ${point.k} edges, faithfulness ${point.faithfulness.toFixed(3)}`);
};

element.addEventListener('input', (event) => {
  const slider = event.target.closest && event.target.closest('input.keep-edges');
  if (slider) redraw(slider.closest('.found-circuit'), Number(slider.value));
});

const pickHead = (node) => {
  const root = node.closest('.found-circuit');
  root.querySelectorAll('.node.chosen').forEach((n) => n.classList.remove('chosen'));
  node.classList.add('chosen');
  trigger('pick', {layer: Number(node.dataset.layer), head: Number(node.dataset.head)});
  const note = root.querySelector('.chosen-note');
  note.hidden = false;
  note.innerHTML = `Head ${node.dataset.name} selected: <a href="#attention-head">its map</a>, ` +
    '<a href="#circuit-head">its circuits</a>.';
};

element.addEventListener('click', (event) => {
  const node = event.target.closest && event.target.closest('.found-circuit .node.head');
  if (node) { pickHead(node); return; }
  const point = event.target.closest && event.target.closest('.found-circuit circle.point');
  if (point) { redraw(point.closest('.found-circuit'), Number(point.dataset.index)); return; }
  const back = event.target.closest && event.target.closest('.found-circuit .found-button');
  if (back) { const root = back.closest('.found-circuit'); redraw(root, dataOf(root).found); }
});

element.addEventListener('keydown', (event) => {
  if (event.key !== 'Enter' && event.key !== ' ') return;
  const node = event.target.closest && event.target.closest('.found-circuit .node.head');
  if (!node) return;
  event.preventDefault();  // Space: no page scroll
  pickHead(node);
});

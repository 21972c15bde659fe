// The circuit found (circuits/find_circuit_view.py). The slider (an <input type=range>: keyboard and touch) picks how many of
// the top edges to keep, one position per k the server measured: the graph shows those edges (less the ones into
// parts nothing kept reads, as the answer lists them), the nodes they touch, the q/k/v ports they enter, and the
// faithfulness measured at that k, all from the answer's numbers: no call. A point of the curve moves the slider there.
// A head is a button: a click (Enter, Space) moves the page's selection to it (the gr.HTML's `pick` event), unless
// the learner builds a circuit (below): then heads and edges put themselves in the Test-your-own-circuit box.
const dataOf = (root) => JSON.parse(root.dataset.found);

const redraw = (root, index) => {
  const data = dataOf(root);
  const point = data.curve[index];
  const unread = new Set(point.unread);
  const used = new Set();
  const entered = new Set();
  root.querySelectorAll('path.edge, path.edge-hit').forEach((edge) => {  // each drawn edge and its target
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

// Build your circuit (the .build-button switch; off: a head click selects as above, so that looking at a head never
// edits a circuit typed in the box). On, a click, a tap, Enter or Space on a head or an edge takes it in or out of
// the Test-your-own-circuit box (#own-circuit-text), written as heads.stated_circuit reads it: heads as a list
// ("0.2, 1.1"), edges as paths ("0.2 -> 1.1 k": each edge's data-edge). The library measures heads or edges, never
// both, so a head clicked into a box of edges (or an edge into one of heads) is refused with what to do instead.
// What the box holds is marked on the graph (.mine) as it is clicked, typed or filled; a path typed ("0.2 -> mlp 0 ->
// 1.1 k") is marked edge by edge, and an edge clicked out of it splits it.
let building = false;
const ARROW = /->|→/;
const INPUT = /^(.*[0-9])\s*([qkv])$/i;  // "1.1 k": a head and the input an edge goes into
// The marks follow the box whatever fills it: typing fires an input event, but a value the page sets (Gradio writes a
// box's value when a handler or a link fills it) fires none, so the box's own value setter is wrapped, once a box.
const followed = new WeakSet();
const follow = (input) => {
  const native = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(input), 'value');
  Object.defineProperty(input, 'value', {
    configurable: true,
    get() { return native.get.call(this); },
    set(value) { native.set.call(this, value); requestAnimationFrame(mark); },
  });
  followed.add(input);
};
const box = () => {
  const input = document.querySelector('#own-circuit-text textarea, #own-circuit-text input');
  if (input && !followed.has(input)) follow(input);
  return input;
};
const nodeName = (text) => text.trim().toLowerCase().replace(/\s+/g, ' ');
const hopOf = (text) => {
  const match = text.trim().match(INPUT);
  return match ? {node: nodeName(match[1]), input: match[2].toLowerCase()} : {node: nodeName(text), input: ''};
};
const edgeKey = (sender, receiver) => `${sender.node} -> ${receiver.node}${receiver.input ? ` ${receiver.input}` : ''}`;
const circuitOf = (text) => {  // as parsed_circuit splits it: items apart by , ; or new lines, paths by arrows
  const items = text.split(/[,;\n]/).map((item) => item.trim()).filter(Boolean);
  const paths = items.filter((item) => ARROW.test(item));
  if (!items.length) return {form: 'empty', heads: [], paths: []};
  if (!paths.length) return {form: 'heads', heads: items.flatMap((item) => item.split(/\s+/)).map(nodeName), paths: []};
  if (paths.length < items.length) return {form: 'mixed', heads: [], paths: []};
  return {form: 'edges', heads: [], paths: paths.map((path) => path.split(ARROW).map(hopOf))};
};
const edgesOf = (circuit) => circuit.paths.flatMap((hops) => hops.slice(1).map((hop, i) => edgeKey(hops[i], hop)));
const pathText = (hops) => hops.map((hop, i) => (i && hop.input ? `${hop.node} ${hop.input}` : hop.node)).join(' -> ');

const withHead = (circuit, name) => {
  const heads = circuit.heads.filter((head) => head !== name);
  return (heads.length < circuit.heads.length ? heads : [...heads, name]).join(', ');
};

const withEdge = (circuit, key) => {  // the edge taken out of every path that has it (a path split there), or added
  const pieces = [];
  let found = false;
  circuit.paths.forEach((hops) => {
    let piece = [hops[0]];
    hops.slice(1).forEach((hop, i) => {
      if (edgeKey(hops[i], hop) !== key) { piece.push(hop); return; }
      found = true;
      pieces.push(piece);
      piece = [{node: hop.node, input: ''}];  // the receiver sends on: its input belonged to the edge taken out
    });
    pieces.push(piece);
  });
  const kept = pieces.filter((piece) => piece.length > 1).map(pathText);
  return (found ? kept : [...kept, key]).join(', ');
};

const REFUSED = {
  heads: 'Your circuit is written as heads (“0.2, 1.1”: every edge among them) and the box takes heads or edges, ' +
    'not both: click heads, or empty the box to build a circuit of edges.',
  edges: 'Your circuit is written as edges and the box takes heads or edges, not both: click edges, or empty the ' +
    'box to build a circuit of heads.',
  mixed: 'The box mixes heads and edges, which cannot be measured: write either, or empty it.',
};

const say = (root, text) => {
  const note = root.querySelector('.build-note');
  note.hidden = false;
  note.textContent = text;
};

const mark = () => {
  const input = box();
  const circuit = circuitOf(input ? input.value : '');
  const heads = new Set(circuit.heads);
  const edges = new Set(edgesOf(circuit));
  element.querySelectorAll('.found-circuit').forEach((root) => {
    root.classList.toggle('building', building);
    root.querySelector('.build').hidden = !input;  // no box on this page: nothing to build in
    const button = root.querySelector('.build-button');
    if (button.getAttribute('aria-pressed') !== String(building)) button.setAttribute('aria-pressed', String(building));
    root.querySelectorAll('.node.head').forEach((node) => {
      node.classList.toggle('mine', heads.has(node.dataset.name));
      const label = `head ${node.dataset.name}: ${building ? 'put it in your circuit or take it out' : 'select it'}`;
      if (node.getAttribute('aria-label') !== label) node.setAttribute('aria-label', label);
    });
    root.querySelectorAll('path.edge, path.edge-hit').forEach((edge) => edge.classList.toggle('mine', edges.has(edge.dataset.edge)));
    root.querySelectorAll('path.edge-hit').forEach((hit) => {
      if (hit.getAttribute('tabindex') !== (building ? '0' : '-1')) hit.setAttribute('tabindex', building ? '0' : '-1');
    });
  });
};

const toggle = (part) => {
  const root = part.closest('.found-circuit');
  const input = box();
  if (!input) return;
  const circuit = circuitOf(input.value);
  const head = part.dataset.name;  // a head node; an edge has data-edge
  const form = head ? 'heads' : 'edges';
  if (circuit.form !== 'empty' && circuit.form !== form) { say(root, REFUSED[circuit.form]); return; }
  const name = head || part.dataset.edge;
  const text = head ? withHead(circuit, head) : withEdge(circuit, name);
  const added = head ? !circuit.heads.includes(head) : !edgesOf(circuit).includes(name);
  input.value = text;
  input.dispatchEvent(new Event('input', {bubbles: true}));  // Gradio's box reads its value on input
  say(root, `${added ? 'Put in' : 'Took out'} ${head ? 'head ' : ''}${name}: your circuit is ` +
    `${text ? `“${text}”; press Test your circuit to measure it` : 'empty'}.`);
  mark();
};

const buildPart = (event) => building && event.target.closest &&
  event.target.closest('.found-circuit .node.head, .found-circuit path.edge, .found-circuit path.edge-hit');

// A finger is wider than the gap between edges that run side by side (a sender's edges into one head's q, k and v
// end 11 units apart, less on a phone's scaled graph), and the edge on top of the stack would take every tap there:
// a click or tap on an edge takes the drawn edge nearest the point touched, each edge sampled every STEP units.
const STEP = 3;
const nearestEdge = (part, event) => {
  const svg = part.ownerSVGElement;
  const matrix = svg && svg.getScreenCTM();
  if (!matrix || !(event.clientX || event.clientY)) return part;  // no point (a click from the keyboard): the part
  const at = new DOMPoint(event.clientX, event.clientY).matrixTransform(matrix.inverse());
  let nearest = part;
  let distance = Infinity;
  svg.querySelectorAll('path.edge-hit:not(.hidden)').forEach((hit) => {
    const length = hit.getTotalLength();
    for (let along = 0; along <= length + STEP; along += STEP) {
      const point = hit.getPointAtLength(Math.min(along, length));
      const d = Math.hypot(point.x - at.x, point.y - at.y);
      if (d < distance) { distance = d; nearest = hit; }
    }
  });
  return nearest;
};

element.addEventListener('click', (event) => {
  const switched = event.target.closest && event.target.closest('.found-circuit .build-button');
  if (switched) { building = !building; mark(); return; }
  const part = buildPart(event);
  if (part) { toggle(part.dataset.edge ? nearestEdge(part, event) : part); return; }
  const node = event.target.closest && event.target.closest('.found-circuit .node.head');
  if (node) { pickHead(node); return; }
  const point = event.target.closest && event.target.closest('.found-circuit circle.point');
  if (point) { redraw(point.closest('.found-circuit'), Number(point.dataset.index)); return; }
  const back = event.target.closest && event.target.closest('.found-circuit .found-button');
  if (back) { const root = back.closest('.found-circuit'); redraw(root, dataOf(root).found); }
});

element.addEventListener('keydown', (event) => {
  if (event.key !== 'Enter' && event.key !== ' ') return;
  const part = buildPart(event);
  const node = event.target.closest && event.target.closest('.found-circuit .node.head');
  if (!part && !node) return;
  event.preventDefault();  // Space: no page scroll
  if (part) toggle(part); else pickHead(node);
});

// Typing in the box moves the marks; a new drawing (Gradio morphs it into the old one, classes included) is marked
// again. mark() changes a class only where it differs, so the observer does not wake itself.
document.addEventListener('input', (event) => {
  if (event.target.closest && event.target.closest('#own-circuit-text')) mark();
});
new MutationObserver(() => requestAnimationFrame(mark)).observe(element, {
  childList: true, subtree: true, attributes: true, attributeFilter: ['class', 'data-found'],
});
mark();

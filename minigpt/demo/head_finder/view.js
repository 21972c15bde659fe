// The Head Finder's table (head_finder/view.py): a click on a column's heading sorts the heads by it (again: the
// other way); a click on a head's row opens its dashboard (the gr.HTML's `open` event).
element.addEventListener('click', (event) => {
  const heading = event.target.closest('th[data-sort]');
  if (heading) {
    const table = heading.closest('table');
    const body = table.querySelector('tbody');
    const column = Number(heading.dataset.column);
    const descending = heading.dataset.order !== 'descending';
    table.querySelectorAll('th[data-sort]').forEach((th) => { th.dataset.order = ''; });
    heading.dataset.order = descending ? 'descending' : 'ascending';
    const value = (row) => {
      const number = Number(row.children[column].dataset.value);
      return Number.isNaN(number) ? -Infinity : number;  // no value (no repeated token): last either way
    };
    const rows = [...body.querySelectorAll('tr')];
    rows.sort((a, b) => (descending ? value(b) - value(a) : value(a) - value(b)) || (a.dataset.order - b.dataset.order));
    rows.forEach((row) => body.appendChild(row));
    return;
  }
  const row = event.target.closest('tr[data-layer]');
  if (!row) return;
  element.querySelectorAll('tr.opened').forEach((r) => r.classList.remove('opened'));
  row.classList.add('opened');
  trigger('open', {layer: Number(row.dataset.layer), head: Number(row.dataset.head)});
});

// "Copy a link to this view": the top tab (read from the page: its ids are its names in lower case), the model, text,
// enlarged head and the lesson's query, step and depth as the page's URL query (read back by minigpt/demo/core/links.py when a
// page opens), put in the address bar, the clipboard (where the browser allows it) and the box beside the button.
(model, text, layer, head, query, step, depth) => {
  const selected = document.querySelector('[role="tab"][aria-selected="true"]');
  const tab = selected ? selected.textContent.trim().toLowerCase() : "";
  const params = new URLSearchParams();
  const values = { tab, model, text, layer, head, query, step, depth };
  for (const [key, value] of Object.entries(values)) {
    if (value !== null && value !== undefined && value !== "") params.set(key, String(value));
  }
  const url = `${location.origin}${location.pathname}?${params.toString()}`;
  history.replaceState(null, "", url);
  if (navigator.clipboard) navigator.clipboard.writeText(url).catch(() => {});
  return url;
}

// "Copy a link to this view": the model, text, enlarged head and step-view query as the page's URL query (read back
// by explorer/links.py when a page opens), put in the address bar, the clipboard (where the browser allows it) and
// the box beside the button.
(text, model, layer, head, query) => {
  const params = new URLSearchParams();
  const values = { model, text, layer, head, query };
  for (const [key, value] of Object.entries(values)) {
    if (value !== null && value !== undefined && value !== "") params.set(key, String(value));
  }
  const url = `${location.origin}${location.pathname}?${params.toString()}`;
  history.replaceState(null, "", url);
  if (navigator.clipboard) navigator.clipboard.writeText(url).catch(() => {});
  return url;
}

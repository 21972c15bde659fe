// The Train tab's token: the visitor's runs are theirs by it (minigpt/demo/ui/training.py). Made once in this browser from
// random bytes (crypto.getRandomValues works outside https too) and kept in its storage, so that a reloaded page is
// the same visitor; none where the storage is closed (a private window's settings): the Gradio session is the visitor.
() => {
  try {
    let token = localStorage.getItem("minigpt-run-owner");
    if (!token) {
      const bytes = crypto.getRandomValues(new Uint8Array(18));
      token = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
      localStorage.setItem("minigpt-run-owner", token);
    }
    return token;
  } catch (error) {
    return "";
  }
}

// The Train tab's token: the visitor's runs are theirs by it (minigpt/demo/training/ui.py). Made once in this browser from
// random bytes (crypto.getRandomValues works outside https too) and kept in its storage, so that a reloaded page is
// the same visitor. Where the storage is closed (a private window's settings), a token for this page alone: a run
// needs an owner, and the page keeps being it until it is closed.
() => {
  const fresh = () =>
    Array.from(crypto.getRandomValues(new Uint8Array(18)), (b) => b.toString(16).padStart(2, "0")).join("");
  try {
    let token = localStorage.getItem("minigpt-run-owner");
    if (!token) {
      token = fresh();
      localStorage.setItem("minigpt-run-owner", token);
    }
    return token;
  } catch (error) {
    return fresh();
  }
}

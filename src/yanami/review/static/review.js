// Keyboard shortcuts for the common path on a dialogue page; no other script runs.
(function () {
  "use strict";
  var checks = [], at = -1;
  function focus(i) {
    if (!checks.length) return;
    if (at >= 0) checks[at].classList.remove("focus");
    at = Math.max(0, Math.min(checks.length - 1, i));
    checks[at].classList.add("focus");
    checks[at].scrollIntoView({ block: "center" });
  }
  function press(root, selector) {
    var button = root.querySelector(selector);
    if (button) button.click();
  }
  document.addEventListener("DOMContentLoaded", function () {
    checks = Array.prototype.slice.call(document.querySelectorAll("li.check"));
    var hash = location.hash.replace("#check-", ""), start = 0;
    checks.forEach(function (c, i) { if (c.dataset.check === hash) start = i + 1; });
    for (var i = start; i < checks.length && checks[i].classList.contains("judged"); i++) start = i + 1;
    if (checks.length) focus(Math.min(start, checks.length - 1));
  });
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA")) {
      if (e.key === "Escape") t.blur();
      // Enter in a check's comment means "fix, with this comment" (not the form's first button, pass)
      if (e.key === "Enter" && t.name === "comment" && t.form && t.form.classList.contains("verdict")) {
        e.preventDefault();
        t.form.querySelector("button[value=fix]").click();
      }
      return;
    }
    var c = at >= 0 ? checks[at] : null;
    switch (e.key) {
      case "j": focus(at + 1); break;
      case "k": focus(at - 1); break;
      case "p": if (c) press(c, "button[value=pass]"); break;
      case "f": if (c) press(c, "button[value=fail]"); break;
      case "x": if (c) { var input = c.querySelector("input[name=comment]"); if (input) { e.preventDefault(); input.focus(); } } break;
      case "a": press(document, "#decision button[value=approve]"); break;
      case "i": press(document, "#decision button[value=refine]"); break;
      case "r": press(document, "#decision button[value=reject]"); break;
      default: return;
    }
  });
})();

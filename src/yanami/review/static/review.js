// The dialogue page's keys, and verdicts saved without a reload; no other script runs.
//
// A verdict (a key or a click) is shown at once and queued; the queue is sent one request at a
// time, in order, so a slow server never loses or reorders a key press. A request the server
// refuses (4xx) is shown and dropped; one that fails on the way (network, 5xx) is retried.
// A decision or an edit waits for the queue to drain; leaving the page with verdicts unsent asks first.
(function () {
  "use strict";
  var checks = [], at = -1, queue = [], sending = false, waiting = null;

  function focus(i) {
    if (!checks.length) return;
    if (at >= 0) checks[at].classList.remove("focus");
    at = Math.max(0, Math.min(checks.length - 1, i));
    checks[at].classList.add("focus");
    checks[at].scrollIntoView({ block: "center" });
  }
  function nextUnjudged(from) {
    for (var i = from + 1; i < checks.length; i++) if (!checks[i].classList.contains("judged")) return i;
    return Math.min(from + 1, checks.length - 1);
  }
  function say(text, bad) {
    var box = document.getElementById("sync");
    if (!box) return;
    box.textContent = text;
    box.className = bad ? "sync bad" : "sync";
  }
  function mark(li, verdict) {
    li.classList.remove("pass", "fail", "fix", "skip", "refused");
    li.classList.add("judged", verdict);
    Array.prototype.forEach.call(li.querySelectorAll("form.verdict button"), function (b) {
      b.classList.toggle("chosen", b.value === verdict);
    });
  }
  function drained() {
    if (queue.length || sending) return;
    document.body.dataset.pending = "0";
    if (waiting) {
      var go = waiting;
      waiting = null;
      go();
    }
  }
  function send() {
    document.body.dataset.pending = String(queue.length);
    if (sending) return;
    if (!queue.length) return drained();
    sending = true;
    var item = queue[0];
    say("saving " + queue.length + " verdict(s)…", false);
    fetch(item.action, {
      method: "POST",
      body: new URLSearchParams(item.body),
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    }).then(function (r) {
      if (r.ok || (r.status >= 400 && r.status < 500)) {
        queue.shift();
        sending = false;
        if (r.ok) {
          if (!queue.length) say("all verdicts saved", false);
        } else {
          item.li.classList.add("refused");
          r.json().then(function (j) { say("not saved: " + j.error, true); },
                        function () { say("not saved: HTTP " + r.status, true); });
        }
        send();
      } else {
        throw new Error("HTTP " + r.status);
      }
    }).catch(function (e) {
      sending = false;
      say("the server did not answer (" + e.message + "); retrying…", true);
      setTimeout(send, 1000);
    });
  }
  function verdict(form, submitter) {
    var li = form.closest("li.check");
    var data = new FormData(form);
    data.set("verdict", submitter.value);
    var comment = String(data.get("comment") || "").trim();
    if ((submitter.value === "fix" || submitter.value === "skip") && !comment) {
      say("a " + submitter.value + " needs a comment: write it, then Enter", true);
      form.dataset.intent = submitter.value;
      var input = form.querySelector("input[name=comment]");
      if (input) input.focus();
      return;
    }
    delete form.dataset.intent;
    mark(li, submitter.value);
    queue.push({ action: form.action, body: Array.from(data.entries()), li: li });
    send();
    var i = checks.indexOf(li);
    if (i >= 0) focus(nextUnjudged(i));
  }

  document.addEventListener("DOMContentLoaded", function () {
    checks = Array.prototype.slice.call(document.querySelectorAll("li.check"));
    var hash = location.hash.replace("#check-", ""), start = 0;
    checks.forEach(function (c, i) { if (c.dataset.check === hash) start = i + 1; });
    for (var i = start; i < checks.length && checks[i].classList.contains("judged"); i++) start = i + 1;
    if (checks.length) focus(Math.min(start, checks.length - 1));
    document.body.dataset.pending = "0";
  });
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.classList.contains("verdict") && e.submitter) {
      e.preventDefault();
      verdict(form, e.submitter);
    } else if (queue.length || sending) {
      e.preventDefault();  // a decision or an edit leaves the page: the verdicts before it are saved first
      var submitter = e.submitter;
      say("saving the verdicts first…", false);
      waiting = function () { form.requestSubmit(submitter); };
    }
  });
  window.addEventListener("beforeunload", function (e) {
    if (queue.length || sending) { e.preventDefault(); e.returnValue = ""; }
  });
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA")) {
      if (e.key === "Escape") t.blur();
      // Enter in a check's comment means "fix, with this comment" (or "skip", after s), never the
      // form's first button (pass)
      if (e.key === "Enter" && t.name === "comment" && t.form && t.form.classList.contains("verdict")) {
        e.preventDefault();
        t.blur();
        t.form.querySelector("button[value=" + (t.form.dataset.intent || "fix") + "]").click();
      }
      return;
    }
    var c = at >= 0 ? checks[at] : null;
    function press(root, selector) {
      var button = root.querySelector(selector);
      if (button) button.click();
    }
    switch (e.key) {
      case "j": focus(at + 1); break;
      case "k": focus(at - 1); break;
      case "p": if (c) press(c, "button[value=pass]"); break;
      case "f": if (c) press(c, "button[value=fail]"); break;
      case "s": if (c) press(c, "button[value=skip]"); break;
      case "x": if (c) { var input = c.querySelector("input[name=comment]"); if (input) { e.preventDefault(); input.focus(); } } break;
      case "a": press(document, "#decision button[value=approve]"); break;
      case "i": press(document, "#decision button[value=refine]"); break;
      case "r": press(document, "#decision button[value=reject]"); break;
      default: return;
    }
  });
})();

// Jobwarden console: the only script besides htmx (the CSP forbids inline scripts).
// A submitted action form disables its button, so a double-click sends one request;
// the server also recognises a repeated form by its one-time request id.
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (!(form instanceof HTMLFormElement) || event.defaultPrevented) return;
  form.querySelectorAll("button[data-once]").forEach(function (button) {
    // Disable after the browser has collected the form data, not before.
    setTimeout(function () { button.disabled = true; button.textContent = "Working…"; }, 0);
  });
});

// "Tick every job on this page": the header checkbox ticks the rows' checkboxes.
document.addEventListener("change", function (event) {
  var box = event.target;
  if (!(box instanceof HTMLInputElement) || !box.hasAttribute("data-select-page")) return;
  var table = box.closest("table");
  table.querySelectorAll("input[name=job_id]").forEach(function (row) {
    row.checked = box.checked;
  });
});

// A panel's polled figures under its own filter form (the overview's trends): a poll
// answer is for the filter the poll was sent with. If it lands while the form's request
// for a new filter runs, or after that request replaced the panel, swapping it in would
// undo the operator's change (or fill a panel no longer on the page): drop it.
document.addEventListener("htmx:beforeSwap", function (event) {
  var elt = event.detail.requestConfig && event.detail.requestConfig.elt;
  if (!(elt instanceof HTMLElement) || !elt.hasAttribute("data-polled-filter")) return;
  var panel = elt.closest("section");
  if (!elt.isConnected || (panel && panel.querySelector("form.htmx-request"))) {
    event.detail.shouldSwap = false;
  }
});

// The Jobs list polls its rows: a poll never replaces them under the operator's hand —
// while a row is ticked or the selection bar has the focus, the poll is skipped and the
// next one tries again.
document.addEventListener("htmx:beforeRequest", function (event) {
  var elt = event.detail.elt;
  if (!(elt instanceof HTMLElement) || !elt.hasAttribute("data-poll-rows")) return;
  var bar = elt.querySelector(".select-bar");
  var busy = elt.querySelector("input[name=job_id]:checked, input[name=all_matching]:checked")
    || (bar && bar.contains(document.activeElement));
  if (busy) event.preventDefault();
});

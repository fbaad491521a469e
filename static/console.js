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

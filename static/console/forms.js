// Field errors of the management API's 400 ({error, fields: [{field, message}]}) shown next to
// the input whose data-path is that field ("title", "prep[0].do", "hooks[1].timeout_s").
"use strict";

const Forms = (() => {
  let serial = 0;

  function clear(form, box) {
    form.querySelectorAll(".field-error.from-api").forEach((e) => e.remove());
    form.querySelectorAll("[aria-invalid]").forEach((e) => {
      e.removeAttribute("aria-invalid");
      e.removeAttribute("aria-describedby");
    });
    if (box) box.hidden = true;
  }

  // Shows err at its fields; what names no input of the form goes to `box`. Returns the count.
  function show(form, box, err) {
    const general = [];
    let first = null;
    for (const { field, message } of err.fields || []) {
      const input = form.querySelector(`[data-path="${CSS.escape(field)}"]`);
      if (!input) {
        general.push(`${field}: ${message}`);
        continue;
      }
      const note = document.createElement("span");
      note.className = "field-error from-api";
      note.id = `api-error-${++serial}`;
      note.dataset.for = field;
      note.textContent = message;
      input.after(note);
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", note.id);
      first = first || input;
    }
    if (!(err.fields || []).length) general.push(err.message);
    if (box && general.length) {
      box.textContent = general.join("; ");
      box.hidden = false;
    }
    (first || box).focus?.();
    if (first) first.scrollIntoView({ block: "center" });
    return (err.fields || []).length;
  }

  return { clear, show };
})();

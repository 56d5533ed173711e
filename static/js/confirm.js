// Confirmation dialogs (portal/core/confirm.py): htmx appends the server's <dialog> to the body;
// open it as a modal (focus moves in, Escape closes, the page behind is inert), and remove it
// when it closes, so focus returns to the button that asked. Confirming is a plain form post.
(function () {
  "use strict";

  document.addEventListener("htmx:load", function (event) {
    var element = event.detail.elt;
    if (!(element instanceof HTMLDialogElement) || !element.hasAttribute("data-confirm-dialog")) {
      return;
    }
    if (document.querySelector("dialog[data-confirm-dialog][open]")) {
      element.remove(); // a second click while one is asking: one question at a time
      return;
    }
    element.showModal();
  });

  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target.closest("[data-confirm-cancel]") : null;
    var dialog = target ? target.closest("dialog") : null;
    if (dialog) {
      dialog.close();
    }
  });

  // "close" does not bubble: listen while it goes down to the dialog.
  document.addEventListener("close", function (event) {
    var dialog = event.target;
    if (dialog instanceof HTMLDialogElement && dialog.hasAttribute("data-confirm-dialog")) {
      dialog.remove();
    }
  }, true);
})();

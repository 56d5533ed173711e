// The site shell's small behaviours, loaded with `defer` on every page (no inline script: CSP).
// - After a refused form (htmx swapped a 400/409/422 answer in place, or a full page came back
//   with errors), focus moves to the first field in error, or to the form's error message.
// - A Home panel that could not be loaded says so (its link still opens it).
// - The navigation's group menus (<details>) close when another opens, on Escape and on a click
//   elsewhere; without this script they still open and close.
(function () {
  "use strict";

  function focusFirstError(root) {
    var target = root.querySelector('[aria-invalid="true"]') ||
      root.querySelector(".form-error[role=alert], .field-error, #page-errors [role=alert]");
    if (!target) {
      return false;
    }
    if (!target.matches("input, select, textarea, button, a[href]")) {
      target.setAttribute("tabindex", "-1");
    }
    target.focus();
    return true;
  }

  document.addEventListener("htmx:afterSettle", function (event) {
    var xhr = event.detail && event.detail.xhr;
    if (!xhr || xhr.status < 400) {
      return;
    }
    var elt = event.detail.elt;
    var root = elt && elt.isConnected ? elt : document;
    if (!focusFirstError(root) && root !== document) {
      focusFirstError(document);
    }
  });

  // A Home panel (or a tenant page's or the chargeback page's section) that htmx could not
  // load keeps its title and link; say that it failed.
  function panelFailed(event) {
    var panel = event.target;
    if (!(panel instanceof Element) || !panel.matches(".home-panel[aria-busy], .tenant-section[aria-busy], .page-section[aria-busy]")) {
      return;
    }
    panel.setAttribute("aria-busy", "false");
    var note = panel.querySelector("[data-panel-failed]");
    if (note) {
      note.hidden = false;
    }
  }
  document.addEventListener("htmx:responseError", panelFailed);
  document.addEventListener("htmx:sendError", panelFailed);

  document.addEventListener("DOMContentLoaded", function () {
    if (document.querySelector("main [aria-invalid=\"true\"], main .form-error[role=alert]")) {
      focusFirstError(document.querySelector("main"));
    }
  });

  function menus() {
    return document.querySelectorAll("details.nav-dropdown[open], details.nav-menu[open]");
  }

  document.addEventListener("toggle", function (event) {
    var opened = event.target;
    if (!(opened instanceof HTMLDetailsElement) || !opened.open) {
      return;
    }
    if (!opened.matches("details.nav-dropdown, details.nav-menu")) {
      return;
    }
    menus().forEach(function (other) {
      if (other !== opened && !other.contains(opened)) {
        other.open = false;
      }
    });
  }, true);

  document.addEventListener("click", function (event) {
    menus().forEach(function (menu) {
      if (!menu.contains(event.target)) {
        menu.open = false;
      }
    });
  });

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") {
      return;
    }
    menus().forEach(function (menu) {
      if (menu.contains(document.activeElement)) {
        menu.querySelector("summary").focus();
      }
      menu.open = false;
    });
  });

  // A table that scrolls sideways (on a phone) takes keyboard focus, so that it can be scrolled
  // without a mouse (WCAG 2.1.1; axe's scrollable-region-focusable). Only the tables this
  // script made focusable are made unfocusable again when they fit.
  function scrollingTablesFocusable() {
    document.querySelectorAll("main table, main .table-scroll").forEach(function (region) {
      if (region.scrollWidth > region.clientWidth) {
        if (!region.hasAttribute("tabindex")) {
          region.setAttribute("tabindex", "0");
          region.setAttribute("data-scroll-focus", "");
        }
      } else if (region.hasAttribute("data-scroll-focus")) {
        region.removeAttribute("tabindex");
        region.removeAttribute("data-scroll-focus");
      }
    });
  }
  document.addEventListener("DOMContentLoaded", scrollingTablesFocusable);
  document.addEventListener("htmx:afterSettle", scrollingTablesFocusable);
  window.addEventListener("resize", scrollingTablesFocusable);
})();

/**
 * The confirmation every destructive action asks first (fork, roll back, cancel, delete): a modal
 * `<dialog>` with the question and `Confirm` / `Cancel`. Not `window.confirm`, which freezes the
 * page, cannot say much, and cannot be styled or driven like the rest of the page.
 *
 * @module
 */

import { byId } from "./dom.js";

/**
 * Ask `question` (with `detail` below it); resolves true on Confirm, false on Cancel or Escape.
 * Focus starts on Cancel (the safe choice) and returns to where it was.
 */
export function confirmAction(question: string, detail = ""): Promise<boolean> {
  const dialog = byId("confirm", HTMLDialogElement);
  byId("confirm-question", HTMLElement).textContent = question;
  const detailElement = byId("confirm-detail", HTMLElement);
  detailElement.textContent = detail;
  detailElement.hidden = detail === "";
  const before = document.activeElement;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        if (before instanceof HTMLElement && before.isConnected) {
          before.focus();
        }
        resolve(dialog.returnValue === "confirm");
      },
      { once: true },
    );
    dialog.showModal();
    byId("confirm-cancel", HTMLButtonElement).focus();
  });
}

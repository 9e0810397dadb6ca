/**
 * Building and updating DOM nodes without a framework and without `innerHTML`: everything the
 * server sends is untrusted text, so it only ever reaches the page as a text node.
 *
 * @module
 */

/** What `h` accepts as a child: a node, text (becomes a text node), or nothing. */
export type Child = Node | string | null | undefined | false;

/**
 * Attributes of `h`: strings and numbers are set, `true` sets an empty attribute, `false` and
 * nullish skip it; functions under `on…` names become listeners.
 */
export type Props = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>;

/**
 * Make an element: `h("button", { type: "button", onclick: go }, "Go")`. Text children become text
 * nodes, so no string is ever parsed as HTML.
 */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (typeof value === "function") {
      element.addEventListener(name.replace(/^on/, ""), value);
    } else if (value === true) {
      element.setAttribute(name, "");
    } else if (value !== false && value !== null && value !== undefined) {
      element.setAttribute(name, String(value));
    }
  }
  element.append(...nodes(children));
  return element;
}

/** The children as nodes, skipping the empty ones. */
function nodes(children: Child[]): Node[] {
  return children
    .filter((child): child is Node | string => child !== null && child !== undefined && child !== false)
    .map((child) => (typeof child === "string" ? document.createTextNode(child) : child));
}

/** The element with this ID, of this type; a missing one is a bug in index.html, so it throws. */
export function byId<T extends HTMLElement>(id: string, type: new () => T): T {
  const element = document.getElementById(id);
  if (!(element instanceof type)) {
    throw new Error(`index.html lacks a <${type.name}> with id "${id}"`);
  }
  return element;
}

/**
 * Replace a container's children, keeping keyboard focus: when the focused element inside it had
 * a `data-key`, its replacement with the same key gets focus back (re-rendering a list must not
 * throw a keyboard user back to the top of the page). If it is gone, `fallback` gets it.
 */
export function replaceContent(container: Element, children: Child[], fallback?: HTMLElement): void {
  const active = document.activeElement;
  const key = active instanceof HTMLElement && container.contains(active) ? active.dataset["key"] : undefined;
  const hadFocus = active instanceof HTMLElement && container.contains(active);
  container.replaceChildren(...nodes(children));
  if (!hadFocus) {
    return;
  }
  const again = key === undefined ? null : container.querySelector<HTMLElement>(`[data-key="${CSS.escape(key)}"]`);
  (again ?? fallback)?.focus();
}

/** Set an element's text (never markup). */
export function setText(element: Element, text: string): void {
  element.textContent = text;
}

/** Run `action` with `button` disabled and marked busy, so a double click cannot send twice. */
export async function whileBusy<T>(button: HTMLButtonElement | null, action: () => Promise<T>): Promise<T> {
  if (button === null) {
    return action();
  }
  const wasDisabled = button.disabled;
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  try {
    return await action();
  } finally {
    button.removeAttribute("aria-busy");
    if (button.isConnected) {
      button.disabled = wasDisabled;
    }
  }
}

/** JSON text shown readably: pretty-printed when it parses, as it is otherwise. */
export function prettyJson(text: string): string {
  if (text.trim() === "") {
    return "";
  }
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** Any value as display text: a string as it is, anything else as pretty JSON. */
export function displayValue(value: unknown): string {
  if (typeof value === "string") {
    return value;
  }
  const text = JSON.stringify(value, null, 2);
  return text === undefined ? String(value) : text;
}

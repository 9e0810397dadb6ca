/**
 * The Server panel: what the server runs (`GetServerInfo`: agents with their tools and categories,
 * mounts and children, the default agent), its thread store and whether that store answers, and
 * the Token field for `--token` servers.
 *
 * @module
 */

import {
  type AgentInfo,
  SubagentMode,
  ThreadStoreKind,
  ToolCategory,
} from "../../clients/typescript/src/index.js";
import { type StoreHealth, storeHealth } from "./api.js";
import { byId, h, replaceContent } from "./dom.js";
import { clearError, describeError, showError } from "./errors.js";
import { enumName } from "./format.js";
import { app, client } from "./state.js";

/** How a tool category reads, as the README's tables say it. */
const CATEGORY_TEXT: Readonly<Partial<Record<ToolCategory, string>>> = {
  [ToolCategory.PLAIN]: "plain",
  [ToolCategory.REQUIRES_APPROVAL]: "requires approval",
  [ToolCategory.EXTERNAL]: "external",
  [ToolCategory.RECOVERY_RETRYABLE]: "recovery-retryable",
};

/** How a child's mode reads. */
const MODE_TEXT: Readonly<Partial<Record<SubagentMode, string>>> = {
  [SubagentMode.INLINE]: "inline",
  [SubagentMode.HOST]: "host-managed",
};

/** Read the server's description and its store's health, and show them. */
export async function loadServer(): Promise<void> {
  clearError("server");
  const body = byId("server-body", HTMLElement);
  body.setAttribute("aria-busy", "true");
  try {
    const [info, health] = await Promise.all([client().getServerInfo(), storeHealth()]);
    app.info = info;
    const note = byId("token-note", HTMLElement);
    note.textContent = "";
    note.classList.remove("bad");
    replaceContent(body, [facts(health), h("h3", {}, "Agents"), ...info.agents.map((agent) => agentView(agent, agent.name === info.defaultAgent))]);
    if (health.state === "unknown") {
      showError("server", health.error);
    }
  } catch (err) {
    app.info = undefined;
    replaceContent(body, [h("p", { class: "muted" }, "The server did not describe itself (see the error above).")]);
    throw err;
  } finally {
    body.removeAttribute("aria-busy");
  }
}

/** The server-wide facts: address, version, default agent, the store and its health. */
function facts(health: StoreHealth): HTMLElement {
  const info = app.info;
  const store = info?.threadStore;
  const rows: [string, Node | string][] = [
    ["Address", app.baseUrl],
    ["Version", info?.serverVersion || "—"],
    ["Default agent", info?.defaultAgent || "—"],
    ["Thread store", store === undefined ? "—" : enumName(ThreadStoreKind, store.kind)],
    ["Store health", healthView(health)],
  ];
  if (store !== undefined && store.kind !== ThreadStoreKind.NONE) {
    rows.push(["Event log", store.eventLog ? "on" : "off"]);
    rows.push(["Queue limit", String(store.maxQueuedRuns)]);
  }
  return h("dl", { class: "facts" }, ...rows.flatMap(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]));
}

/** Serving, or not serving with the error that says why. */
function healthView(health: StoreHealth): HTMLElement {
  if (health.state === "serving") {
    return h("span", { class: "good", "data-health": "serving" }, "serving");
  }
  if (health.state === "not served") {
    return h("span", { class: "muted", "data-health": health.state }, "not served (the server keeps no threads)");
  }
  const { title, message } = describeError(health.error);
  return h("span", { class: "bad", "data-health": health.state }, `${health.state} (${title} — ${message})`);
}

/**
 * One agent, as a disclosure (the default agent's open): its tools with their categories, its
 * mounts and its children. Closed, the summary still says how many of each.
 */
function agentView(agent: AgentInfo, isDefault: boolean): HTMLElement {
  const counts = [
    plural(agent.tools.length, "tool"),
    agent.mounts.length === 0 ? "" : plural(agent.mounts.length, "mount"),
    agent.subagents.length === 0 ? "" : plural(agent.subagents.length, "child", "children"),
  ].filter((count) => count !== "");
  return h(
    "details",
    { class: "agent", open: isDefault },
    h(
      "summary",
      {},
      h("strong", {}, agent.name),
      isDefault ? h("span", { class: "tag" }, "default") : null,
      h("span", { class: "muted small" }, ` ${counts.join(", ")}`),
    ),
    h("h4", {}, "Tools"),
    agent.tools.length === 0
      ? h("p", { class: "muted" }, "none")
      : h(
          "ul",
          { class: "compact" },
          ...agent.tools.map((tool) =>
            h(
              "li",
              { title: tool.description },
              h("code", {}, tool.name),
              " — ",
              CATEGORY_TEXT[tool.category] ?? enumName(ToolCategory, tool.category),
              tool.recoveryRetryable && tool.category !== ToolCategory.RECOVERY_RETRYABLE ? ", recovery-retryable" : "",
            ),
          ),
        ),
    agent.mounts.length === 0
      ? null
      : h(
          "div",
          {},
          h("h4", {}, "Mounts"),
          h(
            "ul",
            { class: "compact" },
            ...agent.mounts.map((mount) =>
              h(
                "li",
                {},
                h("code", {}, mount.name),
                ` — ${mount.providerKey}${mount.processCapable ? ", background processes" : ""}: ${mount.actions.join(", ")}`,
              ),
            ),
          ),
        ),
    agent.subagents.length === 0
      ? null
      : h(
          "div",
          {},
          h("h4", {}, "Children"),
          h(
            "ul",
            { class: "compact" },
            ...agent.subagents.map((child) =>
              h(
                "li",
                { title: child.description },
                h("code", {}, child.name),
                ` — ${MODE_TEXT[child.mode] ?? enumName(SubagentMode, child.mode)}`,
                child.agent === "" ? "" : `, agent ${child.agent}`,
              ),
            ),
          ),
        ),
  );
}

/** "1 tool", "3 tools". */
function plural(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

/** A tool's category as the server declares it (the conversation marks the calls of approval tools that ran as approved). */
export function toolCategory(agent: string, tool: string): ToolCategory | undefined {
  return app.info?.agents.find((candidate) => candidate.name === agent)?.tools.find((candidate) => candidate.name === tool)?.category;
}

// The memory manager page. Talks only through window.AstrBotPluginView (the dashboard's bridge); every value from
// the server is rendered as text (textContent / text nodes), never as HTML.
"use strict";

(() => {
  const bridge = window.AstrBotPluginView;
  const PAGE_SIZE = 50;
  const HISTORY_PAGE = 50;
  const TYPES = ["instruction", "preference", "fact"];
  const SCOPES = ["member", "group", "global"];
  const SOURCES = ["explicit", "extraction"];

  const STRINGS = {
    zh: {
      title: "记忆管理", platform: "平台", lang: "English", all: "全部", allGroups: "全部群",
      tab_browse: "浏览", tab_search: "搜索", tab_recall: "召回测试", tab_history: "历史", tab_transfer: "导入导出",
      tab_stats: "统计", tab_privacy: "删除某人",
      loading: "加载中…", empty: "没有数据", error: "出错了：{0}", noPlatform: "还没有任何群的记忆",
      group: "群", groupId: "群 ID", members: "成员", memories: "记忆", groupMemories: "群公共记忆", todos: "待办",
      episodes: "情境记忆", archived: "已归档", lastChange: "最近变更", open: "打开", back: "← 返回群列表",
      membersOf: "成员", memberId: "成员 ID", name: "名称", count: "数量",
      scope: "范围", type: "类型", source: "来源", member: "成员", content: "内容", importance: "重要度",
      updated: "更新时间", created: "创建时间", lastUsed: "最近使用", addedBy: "添加者", actions: "操作",
      scope_member: "本群个人", scope_group: "本群公共", scope_global: "全局个人",
      type_instruction: "指令", type_preference: "偏好", type_fact: "事实",
      source_explicit: "成员要求", source_extraction: "自动提取",
      edit: "编辑", delete: "删除", move: "移动", save: "保存", cancel: "取消", confirm: "确认",
      deleteSelected: "删除所选（{0}）", selectAll: "全选",
      query: "关键词", search: "搜索", sort: "排序", sort_relevance: "相关度", sort_updated: "最近更新",
      sort_created: "最近创建", sort_importance: "重要度", sort_last_used: "最近使用",
      prev: "上一页", next: "下一页", pageOf: "第 {0} / {1} 页，共 {2} 条",
      editTitle: "编辑记忆", importanceHint: "0 到 1，默认 0.5",
      confirmDelete: "确定删除这 {0} 条记忆吗？删除可以在「历史」里撤销。",
      moveToGroup: "把这条个人记忆移为本群公共记忆？群里每个成员都会看到它。",
      moveToMember: "把这条群公共记忆移给哪位成员？", pickMember: "选择成员",
      saved: "已保存", deleted: "已删除 {0} 条", moved: "已移动", reverted: "已撤销",
      recallNote: "这是一次试运行：不改变任何缓存、统计或最近使用时间；开启语义召回时会调用嵌入模型。",
      message: "消息", runRecall: "试一下", block: "会注入的记忆块", reason: "原因", score: "分数",
      noBlock: "这条消息不会注入任何记忆", items: "条目",
      history: "变更历史", when: "时间", actor: "操作者", op: "操作", kind: "对象", target: "目标",
      refusedTitle: "被拒绝的访问（按人和类型汇总，只记 id，不记内容）", refusedCount: "次数", refusedFirst: "首次",
      refusedLast: "最近", refusedVia: "途径", refusedDropped: "较早的 {0} 项已不再保留", noRefused: "没有被拒绝的访问",
      audit_foreign_id: "指名别人的记忆或待办", audit_group_change: "无权修改群公共内容",
      audit_admin_command: "非管理员使用管理指令", audit_dashboard_scope: "管理页请求越界",
      oldValue: "原值", newValue: "新值", revert: "撤销", loadMore: "加载更多",
      confirmRevert: "撤销变更 #{0}？如果目标之后又被改过，撤销会被拒绝。", erasedEntry: "（内容已清除：删除要求或保留期满）",
      deleteEpisode: "删除", confirmDeleteEpisode: "永久删除这条情境记忆？此操作不可撤销，并从历史中清除其内容。", episodeDeleted: "已删除情境记忆",
      exportDecrypted: "导出明文（不加密：文件含全部内容，请妥善保管）",
      exportTitle: "导出", exportAll: "全部", exportGroup: "一个群", exportMember: "一位成员", download: "下载 JSON",
      importTitle: "导入", chooseFile: "选择导出文件（JSON）", preview: "预览", apply: "应用导入",
      importNew: "新增", importDuplicate: "重复", importConflict: "冲突", importInvalid: "无效", importAdded: "已导入", importApplied: "导入完成", importPlatform: "文件未注明平台时用",
      importNote: "导入按群要么全部成功要么全部不变，和其他途径一样检查 id、内容与上限（被拒绝的群写明原因）；待办的提醒改发到导入的群；成员的“不记录”设置一并导入。也接受设计 000 的版本 0 文件。",
      importReminders: "提醒发往", importOptedOut: "不记录的成员",
      badFile: "文件不是有效的 JSON",
      statsTitle: "统计", overTime: "记忆数随时间", byType: "按类型", byScope: "按范围", bySource: "按来源",
      calls: "后台模型调用", tokensIn: "输入 tokens", tokensOut: "输出 tokens", mostInjected: "最常注入的记忆",
      times: "次数", date: "日期", total: "合计",
      privacyTitle: "删除关于某人的一切",
      privacyText: "删除此人在该平台所有群里的个人记忆、全局记忆、其创建或被指派的待办和缓存的名字；他在情境记忆中的 ID 和名字（概要中改为“某成员”）；他添加的群公共记忆保留（记为前成员），情境记忆的其余内容保留。此操作不可撤销，并从历史中清除内容。",
      userId: "用户 ID", erase: "删除此人的一切", typeToConfirm: "请输入用户 ID「{0}」以确认：",
      erased: "已删除：{0}", mismatch: "输入的 ID 不一致",
      adminNote: "任何能登录控制台的人都能查看和修改所有群的记忆。",
      globalDocument: "全局个人记忆（跨群）", leftOut: "未注入的候选",
      reason_own_instruction: "成员本人的指令", reason_group_instruction: "群指令", reason_relevance: "与消息相关",
      reason_all_fit: "全部放得下", reason_recency_prior: "按类型与新近程度",
      complete: "已全部完成", reattributed: "改记为前成员的群记忆", failed: "失败的群",
      privacyLimits: "本插件删不到的地方：AstrBot 自己的日志和对话数据库（data/data_v4.db 里的对话记录、工具调用），以及 PostgreSQL 在 VACUUM 之前留下的旧行版本和 WAL（未开启加密时是明文）。见 README「删除某人的全部数据」。",
      secretInConfig: "{0} 写在插件配置里：任何能登录控制台的人都能从 AstrBot 的插件配置接口读到它的明文。请把同样的值设为 AstrBot 进程的环境变量 {1}，重启 AstrBot 后再清空这一项。",
      secretShadowed: "{0} 写在插件配置里，但环境变量 {1} 已设置并优先生效，这一项没有被使用：请清空它（任何能登录控制台的人都能读到它的明文）。",
      settingsWarned: "以下插件配置的值无法使用，已改用默认值，并写回了插件配置页（重新打开配置页即可看到）：",
      setting_bool: "{0}：{1} 不是开或关，已改用默认值 {2}。",
      setting_text: "{0}：{1} 不是文本，已改用默认值 {2}。",
      setting_text_list: "{0}：{1} 不是文本列表，已改用默认值 {2}。",
      setting_number: "{0}：{1} 不是数字，已改用默认值 {2}。",
      setting_integer: "{0}：{1} 不是整数，已改用默认值 {2}。",
      setting_range: "{0}：{1} 超出范围 {3}–{4}，已改用默认值 {2}。",
      setting_choice: "{0}：{1} 不是可选的值（{3}），已改用默认值 {2}。",
      setting_zone: "{0}：{1} 不是有效的时区名（如 Asia/Shanghai），已恢复为空，即跟随 AstrBot 的时区。",
      setting_buffer: "{0}：{1} 小于每次提取所需的消息数 {3}，已调大到 {2}。",
      setting_host_zone: "AstrBot 自己的时区设置 {1} 无效，插件改用 {2}：请在 AstrBot 的系统配置中修正。",
    },
    en: {
      title: "Memory manager", platform: "Platform", lang: "中文", all: "All", allGroups: "All groups",
      tab_browse: "Browse", tab_search: "Search", tab_recall: "Recall tester", tab_history: "History",
      tab_transfer: "Export / import", tab_stats: "Statistics", tab_privacy: "Erase a person",
      loading: "Loading…", empty: "Nothing here", error: "Error: {0}", noPlatform: "No group has memories yet",
      group: "Group", groupId: "Group id", members: "Members", memories: "Memories", groupMemories: "Group memories",
      todos: "Todos", episodes: "Episodes", archived: "Archived", lastChange: "Last change", open: "Open",
      back: "← Back to groups", membersOf: "Members", memberId: "Member id", name: "Name", count: "Count",
      scope: "Scope", type: "Type", source: "Source", member: "Member", content: "Content", importance: "Importance",
      updated: "Updated", created: "Created", lastUsed: "Last used", addedBy: "Added by", actions: "Actions",
      scope_member: "Member", scope_group: "Group", scope_global: "Global",
      type_instruction: "Instruction", type_preference: "Preference", type_fact: "Fact",
      source_explicit: "Asked by member", source_extraction: "Extracted",
      edit: "Edit", delete: "Delete", move: "Move", save: "Save", cancel: "Cancel", confirm: "Confirm",
      deleteSelected: "Delete selected ({0})", selectAll: "Select all",
      query: "Keywords", search: "Search", sort: "Sort", sort_relevance: "Relevance", sort_updated: "Recently updated",
      sort_created: "Recently created", sort_importance: "Importance", sort_last_used: "Recently used",
      prev: "Previous", next: "Next", pageOf: "Page {0} of {1}, {2} in all",
      editTitle: "Edit memory", importanceHint: "0 to 1, default 0.5",
      confirmDelete: "Delete these {0} memories? You can undo it under History.",
      moveToGroup: "Make this member memory a group memory? Every member of the group will see it.",
      moveToMember: "Give this group memory to which member?", pickMember: "Choose a member",
      saved: "Saved", deleted: "Deleted {0}", moved: "Moved", reverted: "Reverted",
      recallNote: "A dry run: no cache, statistic or last-used time changes; with semantic recall on it calls the embedding provider.",
      message: "Message", runRecall: "Try it", block: "Block that would be injected", reason: "Reason", score: "Score",
      noBlock: "This message would inject no memory", items: "Items",
      history: "Change history", when: "When", actor: "Actor", op: "Operation", kind: "Kind", target: "Target",
      refusedTitle: "Refused access (per person and kind; ids only, no content)", refusedCount: "Count", refusedFirst: "First",
      refusedLast: "Latest", refusedVia: "Via", refusedDropped: "{0} older entries are no longer kept", noRefused: "No refused access",
      audit_foreign_id: "Named another member's memory or todo", audit_group_change: "Group change without the right",
      audit_admin_command: "Admin command by a non-admin", audit_dashboard_scope: "Dashboard request out of scope",
      oldValue: "Old", newValue: "New", revert: "Revert", loadMore: "Load more",
      confirmRevert: "Revert change #{0}? It is refused if the target changed since.", erasedEntry: "(content erased: on request or at the end of its retention)",
      deleteEpisode: "Delete", confirmDeleteEpisode: "Delete this episode for good? This cannot be undone and purges its content from history.", episodeDeleted: "Episode deleted",
      exportDecrypted: "Export decrypted (plaintext: holds every content; keep it safe)",
      exportTitle: "Export", exportAll: "Everything", exportGroup: "One group", exportMember: "One member",
      download: "Download JSON", importTitle: "Import", chooseFile: "Choose an export file (JSON)", preview: "Preview",
      apply: "Apply import", importNew: "New", importDuplicate: "Duplicate", importConflict: "Conflicting", importInvalid: "Invalid", importAdded: "Added",
      importApplied: "Import applied", importPlatform: "Platform for files that name none",
      importNote: "Import is all-or-nothing per group and checks ids, contents and caps like every other path (a refused group says why); todos' reminders go to the group imported into; members' opt-outs are imported too. Design 000's version-0 files are accepted too.",
      importReminders: "Reminders go to", importOptedOut: "Opted-out members",
      badFile: "The file is not valid JSON",
      statsTitle: "Statistics", overTime: "Memories over time", byType: "By type", byScope: "By scope",
      bySource: "By source", calls: "Background model calls", tokensIn: "Input tokens", tokensOut: "Output tokens",
      mostInjected: "Most injected memories", times: "Times", date: "Date", total: "Total",
      privacyTitle: "Delete everything about one person",
      privacyText: "Deletes the person's member and global memories in every group of the platform, the todos they created or were assigned, and their cached name; their id and names in the episodes (a summary says “a member” / 某成员 instead); group memories they added stay (attributed to a former member), and so does the rest of each episode. This cannot be undone and purges the content from history.",
      userId: "User id", erase: "Delete everything about this person", typeToConfirm: "Type the user id “{0}” to confirm:",
      erased: "Erased: {0}", mismatch: "The id does not match",
      adminNote: "Anyone who can log in to the dashboard can see and change every group's memories.",
      globalDocument: "Global member memories (all groups)", leftOut: "Candidates left out",
      reason_own_instruction: "The member's own instruction", reason_group_instruction: "Group instruction",
      reason_relevance: "Relevant to the message", reason_all_fit: "Everything fit", reason_recency_prior: "Type and recency",
      complete: "Complete", reattributed: "Group memories now by a former member", failed: "Failed groups",
      privacyLimits: "What this plugin cannot reach: AstrBot's own log and conversation database (the conversations and tool calls in data/data_v4.db), and PostgreSQL's dead row versions and WAL until VACUUM (plaintext without encryption). See the README's section on erasing a person.",
      secretInConfig: "{0} is in the plugin's config: anyone who can log in to the dashboard can read it in clear from AstrBot's plugin config API. Set the same value as the environment variable {1} of the AstrBot process, restart AstrBot, then clear the setting.",
      secretShadowed: "{0} is in the plugin's config, but the environment variable {1} is set and wins, so the setting is not used: clear it (anyone who can log in to the dashboard can read it in clear).",
      settingsWarned: "These plugin settings could not be used as given: the default is in effect and was written back to the plugin's config page (reopen it to see):",
      setting_bool: "{0}: {1} is not on or off; the default {2} is in effect.",
      setting_text: "{0}: {1} is not text; the default {2} is in effect.",
      setting_text_list: "{0}: {1} is not a list of texts; the default {2} is in effect.",
      setting_number: "{0}: {1} is not a number; the default {2} is in effect.",
      setting_integer: "{0}: {1} is not a whole number; the default {2} is in effect.",
      setting_range: "{0}: {1} is outside {3}–{4}; the default {2} is in effect.",
      setting_choice: "{0}: {1} is not one of the choices ({3}); the default {2} is in effect.",
      setting_zone: "{0}: {1} is not a known time zone (such as Asia/Shanghai); it is empty again, so AstrBot's own time zone is used.",
      setting_buffer: "{0}: {1} is smaller than the number of messages an extraction waits for ({3}); raised to {2}.",
      setting_host_zone: "AstrBot's own time zone setting {1} is not valid; the plugin uses {2}. Correct it in AstrBot's system settings.",
    },
  };

  const state = {
    lang: "zh",
    tab: "browse",
    platform: "",
    groups: [],
    configSecrets: [], // [{setting, variable, shadowed}]: secrets AstrBot shows in clear to every dashboard login
    openGroup: null, // {platform, group_id}
    groupDetail: null,
  };

  // ---------- small helpers ----------
  function t(key, ...args) {
    const table = STRINGS[state.lang] || STRINGS.zh;
    let s = table[key] ?? STRINGS.zh[key] ?? key;
    args.forEach((a, i) => { s = s.split(`{${i}}`).join(String(a)); });
    return s;
  }

  // el("div", {class: "x", onclick: fn}, "text", child) — strings become text nodes, never HTML.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
      else if (k === "class") node.className = v;
      else if (k === "value") node.value = v;
      else if (k === "checked") node.checked = Boolean(v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

  function option(value, label, selected) { return el("option", { value, selected: selected ? "selected" : null }, label); }

  function fmtTime(v) {
    if (v === undefined || v === null || v === "") return "";
    const d = typeof v === "number" ? new Date(v < 1e12 ? v * 1000 : v) : new Date(v);
    if (Number.isNaN(d.getTime())) return String(v);
    return d.toLocaleString(state.lang === "zh" ? "zh-CN" : "en-US", { hour12: false });
  }

  function fmtNum(v, digits = 2) {
    return typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(digits)) : (v ?? "");
  }

  function label(prefix, value) {
    const key = `${prefix}_${value}`;
    return (STRINGS[state.lang][key] || STRINGS.zh[key]) ? t(key) : String(value ?? "");
  }

  function asList(r, ...keys) {
    if (Array.isArray(r)) return r;
    for (const k of keys) if (r && Array.isArray(r[k])) return r[k];
    return [];
  }

  function text(v) {
    if (v === undefined || v === null) return "";
    if (typeof v === "string") return v;
    if (typeof v === "object" && typeof v.content === "string") return v.content;
    if (Array.isArray(v) && v.every((x) => typeof x !== "object")) return v.join("、");
    return JSON.stringify(v);
  }

  function notify(message, kind = "ok") {
    const box = document.getElementById("notice");
    box.textContent = message;
    box.className = `notice ${kind}`;
    box.hidden = false;
    clearTimeout(notify.timer);
    notify.timer = setTimeout(() => { box.hidden = true; }, kind === "ok" ? 3000 : 8000);
  }

  function errorText(e) { return t("error", (e && e.message) || String(e)); }

  // ---------- server ----------
  const api = {
    get(route, params) {
      const clean = {};
      for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") clean[k] = v;
      return bridge.apiGet(route, clean);
    },
    post(route, body) { return bridge.apiPost(route, body || {}); },
  };

  // ---------- dialogs (window.confirm is blocked in the sandboxed iframe) ----------
  function dialog(title, body, buttons) {
    const dlg = document.getElementById("dialog");
    const form = clear(document.getElementById("dialog-form"));
    append(form, [el("h2", {}, title), body, el("div", { class: "dialog-buttons" }, buttons.map((b) =>
      el("button", { type: "submit", value: b.value, class: b.class || "" }, b.label)))]);
    return new Promise((resolve) => {
      dlg.onclose = () => resolve(dlg.returnValue);
      dlg.returnValue = "";
      dlg.showModal();
    });
  }

  async function confirmDialog(message, { danger = false, requireText = null } = {}) {
    const input = requireText ? el("input", { type: "text", class: "wide", "data-testid": "confirm-input" }) : null;
    const body = el("div", {}, el("p", {}, message), input);
    const answer = await dialog(t("confirm"), body, [
      { value: "cancel", label: t("cancel"), class: "ghost" },
      { value: "ok", label: t("confirm"), class: danger ? "danger" : "" },
    ]);
    if (answer !== "ok") return false;
    if (requireText && input.value.trim() !== requireText) { notify(t("mismatch"), "error"); return false; }
    return true;
  }

  // ---------- memory table (browse and search share it) ----------
  // query: {platform, group_id, scope, type, source, member, q, sort}; opts.members: for "move to member".
  function memoryList(query, opts = {}) {
    const root = el("div", { class: "memory-list" });
    let page = 1;
    let selected = new Map();
    let lastItems = [];

    async function load() {
      clear(root).appendChild(el("p", { class: "muted" }, t("loading")));
      let r;
      try {
        r = await api.get("memories", { ...query, page, page_size: PAGE_SIZE });
      } catch (e) {
        clear(root).appendChild(el("p", { class: "error" }, errorText(e)));
        return;
      }
      lastItems = asList(r, "items", "memories");
      selected = new Map();
      render(typeof r.total === "number" ? r.total : lastItems.length);
    }

    function keyOf(m) { return `${m.group_id ?? query.group_id}|${m.scope}|${m.owner ?? ""}|${m.id}`; }

    function ref(m) {
      return { platform: m.platform || query.platform, group_id: m.group_id ?? query.group_id, scope: m.scope,
        owner: m.owner ?? "", id: m.id };
    }

    function render(total) {
      clear(root);
      const delBtn = el("button", { type: "button", class: "danger", disabled: true, onclick: () => remove([...selected.values()]) },
        t("deleteSelected", 0));
      const updateDel = () => { delBtn.disabled = selected.size === 0; delBtn.textContent = t("deleteSelected", selected.size); };
      const all = el("input", { type: "checkbox", "aria-label": t("selectAll"), onchange: (ev) => {
        root.querySelectorAll("input.pick").forEach((cb) => { cb.checked = ev.target.checked; cb.dispatchEvent(new Event("change")); });
      } });
      const showGroup = !query.group_id;
      const head = el("tr", {}, el("th", {}, all), showGroup && el("th", {}, t("group")), el("th", {}, t("content")),
        el("th", {}, t("type")), el("th", {}, t("importance")), el("th", {}, t("scope")), el("th", {}, t("source")),
        el("th", {}, t("updated")), el("th", {}, t("actions")));
      const rows = lastItems.map((m) => {
        const pick = el("input", { type: "checkbox", class: "pick", onchange: (ev) => {
          if (ev.target.checked) selected.set(keyOf(m), m); else selected.delete(keyOf(m));
          updateDel();
        } });
        const owner = m.scope === "group" ? "" : (m.owner_name || m.owner || "");
        return el("tr", { "data-id": m.id },
          el("td", {}, pick),
          showGroup && el("td", { class: "mono" }, m.group_id ?? ""),
          el("td", { class: "content" }, m.content ?? ""),
          el("td", {}, label("type", m.type)),
          el("td", { class: "num", title: m.effective_importance !== undefined ? `${t("importance")}: ${fmtNum(m.effective_importance)}` : null },
            fmtNum(m.importance)),
          el("td", {}, label("scope", m.scope), owner && el("div", { class: "muted small" }, owner)),
          el("td", {}, label("source", m.source)),
          el("td", { class: "small" }, fmtTime(m.updated_at)),
          el("td", { class: "row-actions" },
            el("button", { type: "button", class: "ghost", onclick: () => edit(m) }, t("edit")),
            m.scope !== "global" && el("button", { type: "button", class: "ghost", onclick: () => move(m) }, t("move")),
            el("button", { type: "button", class: "ghost danger-text", onclick: () => remove([m]) }, t("delete"))));
      });
      const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
      append(root, [
        el("div", { class: "toolbar" }, delBtn),
        lastItems.length ? el("table", { class: "table" }, el("thead", {}, head), el("tbody", {}, rows))
          : el("p", { class: "muted" }, t("empty")),
        el("div", { class: "pager" },
          el("button", { type: "button", class: "ghost", disabled: page <= 1, onclick: () => { page -= 1; load(); } }, t("prev")),
          el("span", {}, t("pageOf", page, pages, total)),
          el("button", { type: "button", class: "ghost", disabled: page >= pages, onclick: () => { page += 1; load(); } }, t("next"))),
      ]);
    }

    async function edit(m) {
      const content = el("textarea", { rows: 4, class: "wide", name: "content" });
      content.value = m.content ?? "";
      const type = el("select", { name: "type" }, TYPES.map((v) => option(v, label("type", v), v === m.type)));
      const importance = el("input", { type: "number", name: "importance", min: 0, max: 1, step: 0.05, value: m.importance ?? 0.5 });
      const body = el("div", { class: "form" },
        el("label", {}, t("content"), content),
        el("label", {}, t("type"), type),
        el("label", {}, t("importance"), importance, el("span", { class: "muted small" }, t("importanceHint"))));
      const answer = await dialog(t("editTitle"), body, [
        { value: "cancel", label: t("cancel"), class: "ghost" }, { value: "save", label: t("save") }]);
      if (answer !== "save") return;
      try {
        await api.post("memory/edit", { ...ref(m), content: content.value, type: type.value,
          importance: Number(importance.value) });
        notify(t("saved"));
        await load();
      } catch (e) { notify(errorText(e), "error"); }
    }

    async function remove(items) {
      if (!items.length || !(await confirmDialog(t("confirmDelete", items.length), { danger: true }))) return;
      const byDocument = new Map();
      for (const m of items) {
        const r = ref(m);
        const k = `${r.platform}|${r.group_id}`;
        if (!byDocument.has(k)) byDocument.set(k, { platform: r.platform, group_id: r.group_id, items: [] });
        byDocument.get(k).items.push({ scope: r.scope, owner: r.owner, id: r.id });
      }
      let deleted = 0;
      try {
        for (const body of byDocument.values()) {
          const r = await api.post("memory/delete", body);
          deleted += Array.isArray(r && r.deleted) ? r.deleted.length : body.items.length;
        }
        notify(t("deleted", deleted));
      } catch (e) { notify(errorText(e), "error"); }
      await load();
    }

    async function move(m) {
      const body = { ...ref(m), confirm: true };
      if (m.scope === "member") {
        if (!(await confirmDialog(t("moveToGroup")))) return;

      } else {
        const members = opts.members || [];
        const pick = members.length
          ? el("select", { class: "wide" }, members.map((u) => option(u.id, u.name ? `${u.name} (${u.id})` : u.id)))
          : el("input", { type: "text", class: "wide", placeholder: t("memberId") });
        const answer = await dialog(t("move"), el("div", {}, el("p", {}, t("moveToMember")), pick), [
          { value: "cancel", label: t("cancel"), class: "ghost" }, { value: "ok", label: t("confirm") }]);
        if (answer !== "ok" || !pick.value.trim()) return;
        body.member = pick.value.trim();
      }
      try {
        await api.post("memory/move", body);
        notify(t("moved"));
        await load();
      } catch (e) { notify(errorText(e), "error"); }
    }

    load();
    return root;
  }

  // ---------- Browse ----------
  async function loadGroups() {
    const r = await api.get("groups", { platform: state.platform });
    state.groups = asList(r, "groups", "items");
    state.platforms = asList(r && r.platforms);
    state.configSecrets = asList(r && r.config_secrets);
    state.settingWarnings = asList(r && r.setting_warnings);
    return state.groups;
  }

  function groupsOfPlatform() {
    return state.groups.filter((g) => !state.platform || g.platform === state.platform);
  }

  // withAll: the first option (value "") is every group of the platform; without it, "" is the platform's global
  // memories (their own document) when there are any.
  function groupSelect(withAll, onchange) {
    const groups = groupsOfPlatform();
    return el("select", { class: "group-select", onchange },
      withAll && option("", t("allGroups")),
      !withAll && groups.some((g) => !g.group_id) && option("", t("globalDocument")),
      groups.filter((g) => g.group_id).map((g) => option(g.group_id, g.group_id)));
  }

  async function renderBrowse(view) {
    if (state.openGroup) return renderGroup(view, state.openGroup);
    const groups = groupsOfPlatform();
    if (!groups.length) { view.appendChild(el("p", { class: "muted" }, t("noPlatform"))); return; }
    const head = el("tr", {}, [state.platform ? null : t("platform"), t("groupId"), t("members"), t("memories"),
      t("groupMemories"), t("todos"), t("episodes"), t("archived"), t("lastChange"), ""].filter((h) => h !== null)
      .map((h) => el("th", {}, h)));
    const rows = groups.map((g) => el("tr", { class: "clickable", "data-group": g.group_id, onclick: () => openGroup(g) },
      !state.platform && el("td", {}, g.platform),
      el("td", { class: g.group_id ? "mono" : "" }, g.group_id || t("globalDocument")),
      el("td", { class: "num", "data-col": "members" }, fmtNum(g.members)),
      el("td", { class: "num", "data-col": "memories" }, fmtNum(g.memories)),
      el("td", { class: "num" }, fmtNum(g.group_memories)), el("td", { class: "num" }, fmtNum(g.todos)),
      el("td", { class: "num" }, fmtNum(g.episodes)), el("td", { class: "num" }, fmtNum(g.archived)),
      el("td", { class: "small" }, fmtTime(g.last_change)),
      el("td", {}, el("button", { type: "button", class: "ghost" }, t("open")))));
    append(view, [el("p", { class: "muted small" }, t("adminNote")),
      el("table", { class: "table", id: "groups-table" }, el("thead", {}, head), el("tbody", {}, rows))]);
  }

  function openGroup(g) {
    state.openGroup = { platform: g.platform || state.platform, group_id: g.group_id };
    show("browse");
  }

  async function renderGroup(view, g) {
    if (!g.group_id) { // the platform's global memories: no group detail, only the list
      append(view, [backButton(), el("h2", {}, t("globalDocument")),
        memoryList({ platform: g.platform, group_id: "", scope: "global" })]);
      return;
    }
    let detail;
    try {
      detail = await api.get("group", g);
    } catch (e) {
      append(view, [backButton(), el("p", { class: "error" }, errorText(e))]);
      return;
    }
    const members = asList(detail.members ?? detail, "members");
    const base = { platform: g.platform, group_id: g.group_id };
    const listBox = el("div", {});
    const showList = (q) => clear(listBox).appendChild(memoryList({ ...base, ...q }, { members }));
    const memberButtons = members.map((u) => el("button", { type: "button", class: "chip", onclick: () => showList({ scope: "member", member: u.id }) },
      u.name ? `${u.name}` : u.id, el("span", { class: "muted small" }, ` ${fmtNum(u.memories ?? u.count ?? "")}`)));
    const scopeButtons = el("div", { class: "toolbar" },
      el("button", { type: "button", class: "chip", onclick: () => showList({}) }, t("all")),
      SCOPES.map((s) => el("button", { type: "button", class: "chip", "data-scope": s, onclick: () => showList({ scope: s }) }, label("scope", s))));
    const counts = detail.counts || detail.scopes || {};
    append(view, [
      backButton(),
      el("h2", {}, `${t("group")} ${g.group_id}`, el("span", { class: "muted small" }, ` · ${g.platform}`)),
      Object.keys(counts).length ? el("p", { class: "muted" }, Object.entries(counts).map(([k, v]) => `${SCOPES.includes(k) ? label("scope", k) : t(k)} ${fmtNum(v)}`).join(" · ")) : null,
      el("h3", {}, t("membersOf")), el("div", { class: "chips" }, memberButtons.length ? memberButtons : el("span", { class: "muted" }, t("empty"))),
      el("h3", {}, t("memories")), scopeButtons, listBox,
      el("h3", {}, t("todos")), simpleTable(asList(detail.todos, "items"), ["content", "status", "assignee", "due_at"]),
      el("h3", {}, t("episodes")), episodeTable(asList(detail.episodes, "items"), base, () => show("browse")),
    ]);
    showList({});
  }

  // The group's recent episodes, each with a delete button (an erasure: confirmed, not revertable).
  function episodeTable(items, base, reload) {
    if (!items || !items.length) return el("p", { class: "muted" }, t("empty"));
    const remove = async (e) => {
      if (!(await confirmDialog(t("confirmDeleteEpisode"), { danger: true }))) return;
      try {
        await api.post("episode/delete", { ...base, episode_id: e.id, confirm: true });
        notify(t("episodeDeleted"));
        reload();
      } catch (err) { notify(errorText(err), "error"); }
    };
    return el("table", { class: "table", id: "episodes-table" },
      el("thead", {}, el("tr", {}, ["summary", "participant_names", "start", "end", ""].map((k) => el("th", {}, k)))),
      el("tbody", {}, items.map((e) => el("tr", { "data-episode": e.id },
        el("td", { class: "content" }, text(e.summary)), el("td", {}, text(e.participant_names)),
        el("td", { class: "small" }, fmtTime(e.start)), el("td", { class: "small" }, fmtTime(e.end)),
        el("td", {}, el("button", { type: "button", class: "ghost danger-text", onclick: () => remove(e) }, t("deleteEpisode")))))));
  }

  function backButton() {
    return el("button", { type: "button", class: "ghost", id: "back", onclick: () => { state.openGroup = null; show("browse"); } }, t("back"));
  }

  // A table of objects whose shape this page does not own (todos, episodes, recall items): the named columns when
  // present, else every scalar field.
  function simpleTable(items, preferred) {
    if (!items || !items.length) return el("p", { class: "muted" }, t("empty"));
    const present = preferred.filter((k) => items.some((i) => i && i[k] !== undefined));
    const keys = present.length ? present
      : [...new Set(items.flatMap((i) => Object.keys(i || {}).filter((k) => typeof i[k] !== "object")))].slice(0, 8);
    return el("table", { class: "table" },
      el("thead", {}, el("tr", {}, keys.map((k) => el("th", {}, k)))),
      el("tbody", {}, items.map((i) => el("tr", {}, keys.map((k) =>
        el("td", {}, /(_at|^at|start|end)$/.test(k) && typeof i[k] === "number" ? fmtTime(i[k]) : text(i[k])))))));
  }

  // ---------- Search ----------
  function renderSearch(view) {
    const group = groupSelect(true);
    const q = el("input", { type: "search", name: "q", placeholder: t("query"), class: "grow" });
    const scope = el("select", { name: "scope" }, option("", `${t("scope")}: ${t("all")}`), SCOPES.map((s) => option(s, label("scope", s))));
    const type = el("select", { name: "type" }, option("", `${t("type")}: ${t("all")}`), TYPES.map((s) => option(s, label("type", s))));
    const source = el("select", { name: "source" }, option("", `${t("source")}: ${t("all")}`), SOURCES.map((s) => option(s, label("source", s))));
    const member = el("input", { type: "text", name: "member", placeholder: t("memberId") });
    const sort = el("select", { name: "sort" }, ["relevance", "updated", "created", "importance", "last_used"].map((s) => option(s, `${t("sort")}: ${t(`sort_${s}`)}`)));
    const results = el("div", {});
    const run = (ev) => {
      if (ev) ev.preventDefault();
      clear(results).appendChild(memoryList({ platform: state.platform, group_id: group.value, q: q.value.trim(),
        scope: scope.value, type: type.value, source: source.value, member: member.value.trim(), sort: sort.value }));
    };
    append(view, [el("form", { class: "filters", id: "search-form", onsubmit: run }, group, q, scope, type, source, member, sort,
      el("button", { type: "submit" }, t("search"))), results]);
  }

  // A loader whose calls supersede each other: `current()` tells a call whether a later one has been made since,
  // so an answer that comes after a newer request (a slow first request, another group chosen meanwhile) is
  // dropped instead of drawn over, or added to, the newer one.
  function latestOnly(load) {
    let newest = 0;
    return (...args) => {
      const request = ++newest;
      return load(() => request === newest, ...args);
    };
  }

  // ---------- Recall tester ----------
  function renderRecall(view) {
    const memberSel = el("select", { name: "user_id" });
    const fillMembers = latestOnly(async (current) => {
      clear(memberSel);
      try {
        const d = await api.get("group", { platform: state.platform, group_id: group.value });
        if (!current()) return;
        clear(memberSel);
        asList(d.members ?? d, "members").forEach((u) => memberSel.appendChild(option(u.id, u.name ? `${u.name} (${u.id})` : u.id)));
      } catch (e) { if (current()) notify(errorText(e), "error"); }
    });
    const group = groupSelect(false, fillMembers);
    const message = el("textarea", { rows: 3, name: "message", class: "wide", placeholder: t("message") });
    const out = el("div", { class: "recall-out" });
    const run = async (ev) => {
      ev.preventDefault();
      clear(out).appendChild(el("p", { class: "muted" }, t("loading")));
      try {
        const r = await api.post("recall/test", { platform: state.platform, group_id: group.value,
          user_id: memberSel.value, message: message.value });
        const block = r.block ?? "";
        clear(out);
        append(out, [el("h3", {}, t("block")),
          block ? el("pre", { class: "block", id: "recall-block" }, text(block)) : el("p", { class: "muted", id: "recall-block" }, t("noBlock")),
          el("h3", {}, t("items")), recallItems(asList(r.memories), "recall-items"),
          asList(r.todos).length ? [el("h3", {}, t("todos")), el("ul", {}, asList(r.todos).map((l) => el("li", {}, text(l))))] : null,
          asList(r.episodes).length ? [el("h3", {}, t("episodes")), el("ul", {}, asList(r.episodes).map((l) => el("li", {}, text(l))))] : null,
          asList(r.left_out).length ? [el("h3", {}, t("leftOut")), recallItems(asList(r.left_out), "recall-left-out")] : null]);
      } catch (e) { clear(out).appendChild(el("p", { class: "error" }, errorText(e))); }
    };
    append(view, [el("p", { class: "note" }, t("recallNote")),
      el("form", { class: "form", id: "recall-form", onsubmit: run },
        el("div", { class: "filters" }, el("label", {}, t("group"), group), el("label", {}, t("member"), memberSel)),
        el("label", {}, t("message"), message), el("div", {}, el("button", { type: "submit" }, t("runRecall")))),
      out]);
    if (group.value) fillMembers();
  }

  function recallItems(items, id) {
    if (!items.length) return el("p", { class: "muted", id }, t("empty"));
    return el("table", { class: "table", id },
      el("thead", {}, el("tr", {}, [t("content"), t("type"), t("scope"), t("reason"), t("score")].map((h) => el("th", {}, h)))),
      el("tbody", {}, items.map((i) => {
        const m = i.memory || i;
        const reason = i.reason ? label("reason", i.reason) : "";
        return el("tr", {},
          el("td", { class: "content" }, text(m.content ?? m.text ?? m)),
          el("td", {}, label("type", m.type ?? i.type ?? "")),
          el("td", {}, label("scope", m.scope ?? i.scope ?? i.kind ?? "")),
          el("td", {}, reason),
          el("td", { class: "num" }, fmtNum(i.score ?? "")));
      })));
  }

  // ---------- History ----------
  function renderHistory(view) {
    const list = el("div", {});
    let before = null;
    let entries = [];
    const load = latestOnly(async (current, more) => {
      if (!more) { entries = []; before = null; }
      try {
        const r = await api.get("history", { platform: state.platform, group_id: group.value, limit: HISTORY_PAGE, before });
        if (!current()) return;
        entries = entries.concat(asList(r, "items"));
        before = r.next_before ?? null;
        draw(before !== null);
      } catch (e) { if (current()) clear(list).appendChild(el("p", { class: "error" }, errorText(e))); }
    });
    const draw = (hasMore) => {
      clear(list);
      if (!entries.length) { list.appendChild(el("p", { class: "muted" }, t("empty"))); return; }
      append(list, [el("table", { class: "table", id: "history-table" },
        el("thead", {}, el("tr", {}, ["#", t("when"), t("actor"), t("kind"), t("op"), t("target"), t("oldValue"), t("newValue"), ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, entries.map((e) => el("tr", { "data-entry": e.id },
          el("td", { class: "num" }, e.id), el("td", { class: "small" }, fmtTime(e.at)), el("td", {}, e.actor ?? ""),
          el("td", {}, e.kind ?? ""), el("td", {}, e.op ?? ""),
          el("td", { class: "small" }, [e.scope && label("scope", e.scope), e.owner_name || e.owner, e.target].filter(Boolean).join(" · ")),
          el("td", { class: "content" }, e.erased ? t("erasedEntry") : text(e.old)),
          el("td", { class: "content" }, e.erased ? "" : text(e.new)),
          el("td", {}, e.kind !== "call" && !e.erased && e.revertable !== false &&
            el("button", { type: "button", class: "ghost", onclick: () => revert(e) }, t("revert"))))))),
      hasMore && el("button", { type: "button", class: "ghost", onclick: () => load(true) }, t("loadMore"))]);
    };
    const revert = async (e) => {
      if (!(await confirmDialog(t("confirmRevert", e.id)))) return;
      try {
        await api.post("history/revert", { platform: state.platform, group_id: group.value, entry_id: e.id });
        notify(t("reverted"));
        load(false);
      } catch (err) { notify(errorText(err), "error"); }
    };
    const refused = el("div", {});
    const AUDIT_KINDS = { foreign_id: "audit_foreign_id", group_change: "audit_group_change",
      admin_command: "audit_admin_command", dashboard_scope: "audit_dashboard_scope" };
    const loadRefused = async () => {
      try {
        const r = await api.get("audit", { platform: state.platform, group_id: group.value });
        const items = asList(r, "items");
        clear(refused);
        append(refused, [el("h3", {}, t("refusedTitle")),
          !items.length ? el("p", { class: "muted" }, t("noRefused")) :
            el("table", { class: "table", id: "audit-table" },
              el("thead", {}, el("tr", {}, [t("actor"), t("kind"), t("refusedCount"), t("refusedFirst"), t("refusedLast"), t("refusedVia"), t("target")].map((h) => el("th", {}, h)))),
              el("tbody", {}, items.map((a) => el("tr", {},
                el("td", {}, a.actor_name ? `${a.actor_name} (${a.actor})` : a.actor),
                el("td", {}, AUDIT_KINDS[a.kind] ? t(AUDIT_KINDS[a.kind]) : a.kind),
                el("td", { class: "num" }, a.count), el("td", { class: "small" }, fmtTime(a.first_at)),
                el("td", { class: "small" }, fmtTime(a.last_at)), el("td", {}, a.last?.via ?? ""),
                el("td", { class: "small" }, a.last?.target ?? ""))))),
          r.dropped ? el("p", { class: "muted" }, t("refusedDropped", r.dropped)) : null]);
      } catch (e) { clear(refused).appendChild(el("p", { class: "error" }, errorText(e))); }
    };
    const group = groupSelect(false, () => { load(false); loadRefused(); });
    append(view, [el("div", { class: "filters" }, el("label", {}, t("group"), group)), list, refused]);
    if (group.options.length) { load(false); loadRefused(); }
  }

  // ---------- Export / import ----------
  function renderTransfer(view) {
    const what = el("select", {}, option("all", t("exportAll")), option("group", t("exportGroup")), option("member", t("exportMember")));
    const group = groupSelect(false);
    const user = el("input", { type: "text", placeholder: t("memberId") });
    const decrypted = el("input", { type: "checkbox", id: "export-decrypted" });
    const sync = () => { group.disabled = what.value === "all"; user.disabled = what.value !== "member"; };
    what.addEventListener("change", sync);
    sync();
    const exportNow = async () => {
      const params = { platform: state.platform };
      if (what.value !== "all") params.group_id = group.value;
      if (what.value === "member") params.user_id = user.value.trim();
      if (decrypted.checked) params.decrypted = "1";
      const name = ["memories", state.platform, params.group_id, params.user_id].filter(Boolean).join("-") + ".json";
      try { await bridge.download("export", params, name); } catch (e) { notify(errorText(e), "error"); }
    };

    const file = el("input", { type: "file", accept: ".json,application/json", id: "import-file" });
    // Files of design 000 (version 0) do not name their platform: this one is used for them.
    const importPlatform = el("input", { type: "text", id: "import-platform", value: state.platform || "lark", size: 10 });
    const out = el("div", { id: "import-out" });
    let parsed = null;
    const readFile = async () => {
      const f = file.files && file.files[0];
      if (!f) return null;
      const content = await f.text();
      try { JSON.parse(content); } catch { notify(t("badFile"), "error"); return null; }
      return content;
    };
    const preview = async () => {
      parsed = await readFile();
      if (!parsed) return;
      clear(out).appendChild(el("p", { class: "muted" }, t("loading")));
      try {
        const r = await api.post("import/preview", { platform: importPlatform.value.trim(), content: parsed });
        clear(out);
        append(out, [importSummary(r), el("button", { type: "button", id: "import-apply", onclick: apply }, t("apply"))]);
      } catch (e) { clear(out).appendChild(el("p", { class: "error" }, errorText(e))); }
    };
    const apply = async () => {
      try {
        const r = await api.post("import/apply", { platform: importPlatform.value.trim(), content: parsed });
        clear(out);
        append(out, [el("p", { class: "ok" }, t("importApplied")), importSummary(r)]);
        await refreshGroups();
        drawChrome();
      } catch (e) { notify(errorText(e), "error"); }
    };
    append(view, [
      el("section", { class: "card" }, el("h2", {}, t("exportTitle")),
        el("div", { class: "filters" }, what, group, user, el("label", {}, decrypted, t("exportDecrypted")),
          el("button", { type: "button", id: "export-btn", onclick: exportNow }, t("download")))),
      el("section", { class: "card" }, el("h2", {}, t("importTitle")), el("p", { class: "muted small" }, t("importNote")),
        el("div", { class: "filters" }, el("label", {}, t("chooseFile"), file),
          el("label", {}, t("importPlatform"), importPlatform),
          el("button", { type: "button", id: "import-preview", onclick: preview }, t("preview"))), out),
    ]);
  }

  function importSummary(r) {
    const groups = asList(r, "groups", "items");
    const rows = groups.map((g) => {
      const c = g.counts || {};
      const reminders = asList(g.reminders).map((r) => `${r.to} (${fmtNum(r.todos)})`).join(", ");
      const optedOut = asList(g.opted_out);
      return el("tr", { "data-group": g.group_id ?? "" },
        el("td", { class: "mono" }, g.group_id || t("globalDocument")),
        el("td", { class: "num" }, fmtNum(c.new ?? "")), el("td", { class: "num" }, fmtNum(c.duplicate ?? "")),
        el("td", { class: "num" }, fmtNum(c.conflicting ?? "")), el("td", { class: "num" }, fmtNum(c.invalid ?? "")),
        el("td", { class: "mono small" }, reminders || "—"),
        el("td", { class: "num", title: optedOut.join(", ") || null }, fmtNum(g.opted_out_count ?? 0)),
        el("td", { class: g.refused ? "error" : "num" }, g.refused ? g.refused : (g.added !== undefined ? fmtNum(g.added) : "")));
    });
    return el("table", { class: "table", id: "import-summary" },
      el("thead", {}, el("tr", {}, [t("group"), t("importNew"), t("importDuplicate"), t("importConflict"),
        t("importInvalid"), t("importReminders"), t("importOptedOut"), t("importAdded")].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows));
  }

  // ---------- Statistics ----------
  function renderStats(view) {
    const out = el("div", {});
    // The first request (every group) reads many groups: it can answer after the request for the group chosen since.
    const load = latestOnly(async (current) => {
      clear(out).appendChild(el("p", { class: "muted" }, t("loading")));
      try {
        const s = await api.get("stats", { platform: state.platform, group_id: group.value });
        if (!current()) return;
        clear(out);
        const over = asList(s.over_time);
        const breakdown = s.breakdown || {};
        append(out, [
          el("h3", {}, t("overTime")), over.length ? timeChart(over) : el("p", { class: "muted" }, t("empty")),
          el("div", { class: "grid3" },
            countCard(t("byType"), breakdown.type, "type"), countCard(t("byScope"), breakdown.scope, "scope"),
            countCard(t("bySource"), breakdown.source, "source")),
          el("h3", {}, t("calls")), callsTable(s.calls),
          el("h3", {}, t("mostInjected")), injectedTable(asList(s.most_injected)),
        ]);
      } catch (e) { if (current()) clear(out).appendChild(el("p", { class: "error" }, errorText(e))); }
    });
    const group = groupSelect(true, load);
    append(view, [el("div", { class: "filters" }, el("label", {}, t("group"), group)), out]);
    load();
  }

  function injectedTable(items) {
    if (!items.length) return el("p", { class: "muted" }, t("empty"));
    return el("table", { class: "table" },
      el("thead", {}, el("tr", {}, [t("times"), t("content"), t("type"), t("scope"), t("group")].map((h) => el("th", {}, h)))),
      el("tbody", {}, items.map((i) => el("tr", {}, el("td", { class: "num" }, fmtNum(i.count)),
        el("td", { class: "content" }, i.content ?? ""), el("td", {}, label("type", i.type)),
        el("td", {}, label("scope", i.scope)), el("td", { class: "mono" }, i.group_id || t("globalDocument"))))));
  }

  function countCard(title, counts, prefix) {
    const entries = Object.entries(counts || {});
    const max = Math.max(1, ...entries.map(([, v]) => Number(v) || 0));
    return el("section", { class: "card" }, el("h4", {}, title), entries.length ? entries.map(([k, v]) =>
      el("div", { class: "bar-row" }, el("span", { class: "bar-label" }, label(prefix, k)),
        el("span", { class: "bar", style: `width:${Math.round(((Number(v) || 0) / max) * 100)}%` }),
        el("span", { class: "num" }, fmtNum(v)))) : el("p", { class: "muted" }, t("empty")));
  }

  function callsTable(calls) {
    if (!calls || typeof calls !== "object") return el("p", { class: "muted" }, t("empty"));
    const rows = Object.entries(calls).filter(([, v]) => v && typeof v === "object");
    if (!rows.length) return el("p", { class: "muted" }, t("empty"));
    return el("table", { class: "table" },
      el("thead", {}, el("tr", {}, ["", t("calls"), t("tokensIn"), t("tokensOut")].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows.map(([actor, v]) => el("tr", {}, el("td", {}, actor), el("td", { class: "num" }, fmtNum(v.calls ?? 0)),
        el("td", { class: "num" }, fmtNum(v.input_tokens ?? 0)), el("td", { class: "num" }, fmtNum(v.output_tokens ?? 0))))));
  }

  // Memories per day as an SVG bar chart (built with DOM calls, no library).
  function timeChart(days) {
    const NS = "http://www.w3.org/2000/svg";
    const w = 640, h = 160, pad = 24;
    const values = days.map((d) => Number(d.memories ?? 0));
    const max = Math.max(1, ...values);
    const bw = Math.min(40, (w - pad * 2) / values.length);
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    svg.setAttribute("class", "chart");
    values.forEach((v, i) => {
      const r = document.createElementNS(NS, "rect");
      const bh = ((h - pad * 2) * v) / max;
      r.setAttribute("x", String(pad + i * bw + 1));
      r.setAttribute("y", String(h - pad - bh));
      r.setAttribute("width", String(Math.max(1, bw - 2)));
      r.setAttribute("height", String(bh));
      const title = document.createElementNS(NS, "title");
      title.textContent = `${days[i].day ?? ""}: ${v}`;
      r.appendChild(title);
      svg.appendChild(r);
    });
    const caption = el("div", { class: "muted small" }, `${days[0].day ?? ""} – ${days[days.length - 1].day ?? ""} · max ${max}`);
    return el("div", {}, svg, caption);
  }

  // ---------- Delete everything about one person ----------
  function renderPrivacy(view) {
    const user = el("input", { type: "text", name: "user_id", placeholder: t("userId"), class: "grow" });
    const out = el("div", {});
    const run = async (ev) => {
      ev.preventDefault();
      const id = user.value.trim();
      if (!id) return;
      if (!(await confirmDialog(`${t("privacyText")}\n\n${t("typeToConfirm", id)}`, { danger: true, requireText: id }))) return;
      try {
        const r = await api.post("person/erase", { platform: state.platform, user_id: id, confirm: true });
        clear(out).appendChild(el("p", { class: r && r.complete === false ? "error" : "ok" }, t("erased", id)));
        if (r && typeof r === "object") out.appendChild(kvTable(r));
        await refreshGroups();
      } catch (e) { notify(errorText(e), "error"); }
    };
    append(view, [el("h2", {}, t("privacyTitle")), el("p", { class: "note" }, t("privacyText")),
      el("p", { class: "muted small" }, t("privacyLimits")),
      el("form", { class: "filters", id: "privacy-form", onsubmit: run }, el("span", {}, state.platform), user,
        el("button", { type: "submit", class: "danger" }, t("erase"))), out]);
  }

  function kvTable(obj) {
    return el("table", { class: "table kv" }, el("tbody", {}, Object.entries(obj).map(([k, v]) =>
      el("tr", {}, el("th", {}, STRINGS.zh[k] ? t(k) : k), el("td", {}, text(v))))));
  }

  // ---------- settings the plugin could not use as given: a banner like the secrets one ----------
  // The server gives {setting, section, label, reason, given, used, detail}; the words are the page's own
  // (STRINGS: settingsWarned, setting_<reason>).

  function drawSettingWarnings() {
    const box = clear(document.getElementById("setting-warnings"));
    const warnings = state.settingWarnings || [];
    box.hidden = warnings.length === 0;
    if (!warnings.length) return;
    box.appendChild(el("p", {}, t("settingsWarned")));
    warnings.forEach((w) => {
      const name = state.lang === "zh" && w.label ? (w.section ? `${w.section} › ${w.label}` : w.label) : w.setting;
      const key = STRINGS.zh[`setting_${w.reason}`] ? `setting_${w.reason}` : "setting_number";
      box.appendChild(el("p", { "data-setting": w.setting }, t(key, name, w.given, w.used, ...(w.detail || []))));
    });
  }

  // ---------- shell ----------
  const TABS = { browse: renderBrowse, search: renderSearch, recall: renderRecall, history: renderHistory,
    transfer: renderTransfer, stats: renderStats, privacy: renderPrivacy };

  function drawChrome() {
    document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
    document.getElementById("title").textContent = t("title");
    document.getElementById("lang").textContent = t("lang");
    document.querySelectorAll("[data-t]").forEach((n) => { n.textContent = t(n.dataset.t); });
    const secrets = clear(document.getElementById("secrets"));
    state.configSecrets.forEach((s) => secrets.appendChild(el("p", { "data-setting": s.setting },
      t(s.shadowed ? "secretShadowed" : "secretInConfig", s.setting, s.variable))));
    secrets.hidden = state.configSecrets.length === 0;
    drawSettingWarnings();
    const tabs = clear(document.getElementById("tabs"));
    Object.keys(TABS).forEach((name) => tabs.appendChild(el("button", { type: "button", role: "tab", "data-tab": name,
      "aria-selected": String(state.tab === name), class: state.tab === name ? "tab active" : "tab",
      onclick: () => { if (name === "browse") state.openGroup = null; show(name); } }, t(`tab_${name}`))));
    const platforms = knownPlatforms();
    if (state.platform && !platforms.includes(state.platform)) platforms.unshift(state.platform);
    const sel = clear(document.getElementById("platform"));
    platforms.forEach((p) => sel.appendChild(option(p, p, p === state.platform)));
    sel.disabled = platforms.length < 2;
  }

  async function show(tab) {
    state.tab = tab;
    drawChrome();
    const view = clear(document.getElementById("view"));
    try {
      await TABS[tab](view);
    } catch (e) {
      view.appendChild(el("p", { class: "error" }, errorText(e)));
    }
  }

  function knownPlatforms() {
    return [...new Set([...(state.platforms || []), ...state.groups.map((g) => g.platform)].filter(Boolean))];
  }

  async function refreshGroups() {
    const previous = state.platform;
    state.platform = "";
    await loadGroups();
    const platforms = knownPlatforms();
    state.platform = platforms.includes(previous) ? previous : (platforms[0] || "");
  }

  async function start() {
    if (!bridge) {
      document.getElementById("view").textContent = "AstrBotPluginView bridge missing";
      return;
    }
    const ctx = await bridge.ready();
    const locale = (ctx && ctx.locale) || bridge.getLocale();
    state.lang = String(locale || "zh-CN").toLowerCase().startsWith("en") ? "en" : "zh";
    document.getElementById("lang").addEventListener("click", () => {
      state.lang = state.lang === "zh" ? "en" : "zh";
      show(state.tab);
    });
    document.getElementById("platform").addEventListener("change", (ev) => {
      state.platform = ev.target.value;
      state.openGroup = null;
      show(state.tab);
    });
    try {
      await refreshGroups();
    } catch (e) {
      drawChrome();
      document.getElementById("view").appendChild(el("p", { class: "error" }, errorText(e)));
      markReady();
      return;
    }
    await show("browse");
    markReady();
  }

  // For the end-to-end test and the benchmark: the moment the first view is on screen.
  function markReady() {
    document.body.dataset.ready = "1";
    window.__memoryManagerReadyAt = performance.now();
  }

  start();
})();

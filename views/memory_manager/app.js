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
      // issue 24: a memory's picture or document
      picture: "图片", pictureUnnamed: "未命名图片", fileUnnamed: "未命名文件", openPicture: "点击查看原图",
      downloadFile: "点击下载文件", downloadPicture: "下载原图", close: "关闭", pictureLoading: "正在加载图片…",
      pictureFailed: "图片无法显示：{0}",
      // issue 35 item 4: every time is in the plugin's zone, said once in the header
      zoneLabel: "时间均为 {0}（{1}）",
      // issue 20 items 5 and 8: todos, bulk edits, CSV, the chart
      todoShowClosed: "显示已结束的待办（{0}）", todoZone: "时间按 {0}", todoWho: "负责人", todoRemind: "提醒时间",
      todoDue: "截止", todoStatus: "状态", todoDelivery: "提醒送达", todoCreatedBy: "创建者：{0}", todoWholeGroup: "全群", todoSetBy: "由 {0} 设的提醒",
      todoMarkDone: "完成", todoCancel: "取消待办", todoDoneOk: "已标记为完成", todoCancelledOk: "已取消待办",
      todoConfirmCancel: "取消待办「{0}」？取消后不再提醒。", todoEditTitle: "修改待办",
      todoNoRemind: "这条待办所在的平台现在不能主动发消息，不能设置提醒时间。",
      todoRecurHint: "{0}重复：时间会落在规则的下一个日子", todoNone: "没有未完成的待办",
      todoNote: "这里的修改和成员用待办工具修改时一样检查（时间、重复规则、内容），以“控制台（登录名）”记入历史，可以在“历史”里撤销（已发出的提醒不会撤回，也不会再发一次）。",
      todo_pending: "未完成", todo_done: "已完成", todo_cancelled: "已取消", todo_expired: "已过期",
      todo_unconfirmed: "待确认（从聊天中识别，确认后才提醒）",
      // issue 35 item 3: a refused todo edit, said beside its field
      err_time_past: "这个时间（{when}）已经过去：请选一个以后的时间。", err_time_unreadable: "看不懂这个时间：请在框里选日期和时刻。",
      err_time_out_of_range: "这个时间太远了：最晚只能设到 {latest} 年底。",
      err_time_dst_gap: "这个时刻在 {zone} 不存在（夏令时跳过了这段时间）：可以改成 {shifted}。",
      err_remind_after_due: "提醒时间晚于截止时间（{due}）：提醒要在截止之前。",
      err_remind_unavailable: "这条待办所在的平台现在不能主动发消息，不能设置提醒时间。",
      err_remind_needed: "原定的提醒时间（{when}）已经过去：确认这条待办时请选一个新的提醒时间。",
      err_recurrence_no_day: "按重复规则找不到下一次的日子：请换一个时间。", err_recurrence_invalid: "这条待办的重复规则无法识别。",
      err_status_invalid: "状态只能是完成或取消。", err_todo_refused: "{0}",
      err_todo_closed: "这条待办已经结束（完成、取消或过期），不能再修改：列表已刷新。",
      err_todo_gone: "这条待办已不存在（可能刚被移除）：列表已刷新。",
      // issue 35 item 6: what became of a todo's reminder when a revert put it back
      todoInHistory: "{0}（{1}）", revertReminder_rearmed: "「{0}」的提醒将在 {1} 照常发出", revertReminder_resumed: "「{0}」的重复提醒从 {1} 继续（其间错过的不补发）",
      revertReminder_sent: "「{0}」的提醒已在 {1} 发出，不会再发", revertReminder_settled: "「{0}」{1} 的提醒已结束（发送失败或错过），不会再发",
      revertReminder_past: "「{0}」原定 {1} 的提醒时间已过，不会补发：需要提醒请修改提醒时间",
      delivery_sent: "已提醒（{0}）", delivery_late: "已补发提醒（{0}）", delivery_retrying: "提醒发送失败，将重试",
      delivery_failed: "提醒发送失败（{0}）", delivery_missed: "错过了提醒（{0}，机器人当时离线）", deliveryRetryAt: "下次重试 {0}",
      deliveryWaiting: "将于 {0} 提醒", deliveryUnconfirmed: "确认后才会提醒", deliveryNone: "不提醒",
      rec_daily: "每天", rec_weekdays: "每个工作日（周一至周五）", rec_weekly: "每周{0}", rec_monthly: "每月 {0} 日（小月取月末）",
      day_mon: "一", day_tue: "二", day_wed: "三", day_thu: "四", day_fri: "五", day_sat: "六", day_sun: "日", listSep: "、",
      bulkEdit: "批量修改（{0}）", bulkKeep: "不变", bulkTitle: "批量修改 {0} 条记忆",
      bulkIntro: "所选的 {0} 条记忆一起修改，留空的项不变。整次修改在历史里是一个事务，撤销其中任一条即全部撤销。",
      bulkToGroup: "把所选的 {0} 条记忆中的个人记忆改为本群公共记忆？群里每个成员的对话都会用到它们。", bulkDone: "已修改 {0} 条",
      bulkLeftOut: "已修改 {0} 条；{1} 条超过上限，没有移动、保持原样：{2}",
      chartTitle: "每天的记忆总数", chartX: "日期", chartY: "记忆数", chartCaption: "{0} 至 {1} · 最近 {2} 条 · 最多 {3} 条",
      downloadCsv: "下载 CSV（表格）",
      csvNote: "CSV 只含记忆（不含待办、情境记忆和归档）：群、成员、范围、类型、内容、重要度、来源、创建时间、更新时间；UTF-8 带 BOM，Excel 可直接打开。CSV 是明文：配置了加密密钥时须勾选“导出明文”。",
      title: "记忆管理", platform: "平台", lang: "English", all: "全部", allGroups: "全部群",
      tab_browse: "浏览", tab_search: "搜索", tab_recall: "召回测试", tab_history: "历史", tab_transfer: "导入导出",
      tab_stats: "统计", tab_privacy: "删除某人",
      loading: "加载中…", empty: "没有数据", error: "出错了：{0}", noPlatform: "还没有任何群的记忆",
      // issue 35 item 11: an empty instance says how a first memory gets here
      emptyHow: "第一条记忆这样来：",
      emptyTell: "群成员在群里 @机器人 说“记住，在这个群叫我老王”：机器人记下后（需要一个支持工具调用的聊天模型），这个群就出现在这里。",
      emptyWatch: "打开插件配置里的“自动记忆：从群聊中提取”后，群里照常聊天也会整理出记忆（默认关闭，会产生模型费用）。",
      emptyImport: "已有别的实例导出的文件，或 LivingMemory 的数据库？在「导入导出」里导入。", emptyImportGo: "去导入",
      // issue 35 (the new operator's retry): the tabs of a fresh instance say what is missing
      noPlatformYet: "（还没有）", historyNothing: "还没有任何群的记忆，所以还没有变更记录：群里有了第一条记忆后，这里列出它的每一次变更。",
      privacyNothing: "还没有任何群的记忆，没有可删除的数据：群里有了第一条记忆后，才能在这里删除某人的数据。",
      err_no_groups: "还没有任何群的记忆，没有可删除的数据：没有删除任何内容。",
      emptySettings: "插件配置：控制台的 插件 → 「群成员长期记忆」卡片 → 插件配置。AstrBot 管理员在群里发 /memory status 查看生效的设置，/memory help 列出全部指令。",
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
      semanticRecall: "按意思匹配：{0}",
      message: "消息", runRecall: "试一下", block: "会注入的记忆块", reason: "原因", score: "分数",
      noBlock: "这条消息不会注入任何记忆", items: "条目",
      history: "变更历史", when: "时间", actor: "操作者", op: "操作", kind: "对象", target: "目标",
      refusedTitle: "被拒绝的访问（按人和类型汇总，只记 id，不记内容）", refusedCount: "次数", refusedFirst: "首次",
      refusedLast: "最近", refusedVia: "途径", refusedDropped: "较早的 {0} 项已不再保留", noRefused: "没有被拒绝的访问",
      audit_foreign_id: "指名别人的记忆或待办", audit_group_change: "无权修改群公共内容",
      audit_admin_command: "非管理员使用管理指令", audit_dashboard_scope: "管理页请求越界",
      oldValue: "原值", newValue: "新值", revert: "撤销", loadMore: "加载更多",
      op_add: "新增", op_update: "修改", op_delete: "删除", op_revert: "撤销", op_archive: "归档", op_restore: "恢复",
      op_promote: "升级", op_merge: "合并", op_boost: "提升重要度", op_erase: "清除", op_purge: "永久删除",
      op_remind: "提醒", op_remind_attempt: "尝试提醒", op_remind_failed: "提醒失败", op_remind_waiting: "等待提醒",
      op_missed: "错过提醒", op_import: "导入", op_move: "移动", op_optout: "不再记录", op_optin: "恢复记录", op_caption: "图片描述",
      op_keep: "保留", op_done: "完成", op_cancel: "取消", op_expire: "过期", op_call: "模型调用",
      kind_memory: "记忆", kind_todo: "待办", kind_episode: "情境记忆", kind_call: "后台调用", kind_privacy: "隐私",
      kind_archive: "归档",
      actor_extraction: "自动提取", actor_maintenance: "定期整理", actor_review: "记忆审核", actor_consolidation: "记忆合并",
      actor_scheduler: "提醒调度", actor_dashboard: "控制台（{0}）", actor_erase: "删除请求", actor_import: "导入",
      actor_caption: "图片描述", actor_admin: "管理员（{0}）", actor_topics: "话题起名",
      tip_actor_topics: "提取模型为统计页的话题起名（后台模型调用，只看群公共记忆和情境摘要）",
      // issue 35 (the new operator's retry): the history's tooltips say what an actor or an operation is, not its code
      tip_actor_dashboard: "在控制台由登录名 {0} 操作", tip_actor_extraction: "插件从群聊中自动提取记忆（后台模型调用）",
      tip_actor_maintenance: "插件的定期整理（老化、归档、到期清理）", tip_actor_review: "插件的记忆审核（后台模型调用）",
      tip_actor_consolidation: "插件合并相近的记忆（后台模型调用）", tip_actor_caption: "插件为图片写描述（后台模型调用）",
      tip_actor_scheduler: "插件的提醒调度：到时间在群里发出待办的提醒，并记下结果", tip_actor_erase: "管理员的“删除某人”请求",
      tip_actor_import: "从文件导入", tip_op_revert: "撤销了更早的变更（见原值与新值）",
      tip_op_remind: "提醒已在群里发出", tip_op_remind_attempt: "开始发送提醒：先记下再发，重启后不会重复发送",
      tip_op_remind_failed: "提醒没能发出（原因见插件日志）", tip_op_remind_waiting: "提醒到时间了，但它的平台还没连上：连上后再发",
      tip_op_missed: "提醒到时间时机器人离线太久，不再补发", tip_op_expire: "过了截止时间仍未完成，待办自动结束",
      tip_op_purge: "已结束的待办或归档的记忆过了保留期，从文件中移除", tip_op_erase: "删除某人时清除了这条记录的内容",
      revertedBy: "已撤销（#{0}，{1}）",
      changeNo: "变更号", tip_changeNo: "/memory revert 用的就是这个编号。编号不连续：模型调用的用量记录也占编号，但不是变更，不列在这里。",
      todoStatus: "状态", assignee: "负责人",             epSummary: "概要", epParticipants: "参与者", epStart: "开始", epEnd: "结束",
      memberFilter: "成员（名称或 ID）",
      relevance: "匹配度", relevanceHint: "与关键词的匹配程度：100% 表示每个词都在这条记忆里且分量十足",
      err_content_empty: "内容不能为空。", err_content_too_long: "内容太长：{length} 个字，最多 {max} 个字。",
      err_importance_range: "重要度必须是 0 到 1 之间的数。", err_type_invalid: "请选择一种类型。",
      err_duplicate: "这位成员已有一条同样内容的记忆（{id}）：请编辑或删除那一条。",
      err_memory_gone: "这条记忆已不存在（可能刚被删除或移动）：列表已刷新。",
      err_nothing_changed: "没有任何改动。", err_member_unknown: "这个群里没有成员「{member}」。",
      err_group_unknown: "没有群「{group}」的记忆（可能已被删除）。", err_revert_refused: "这条变更不能撤销：{0}",
      err_already_reverted: "这条变更已经撤销过（#{by}，{who}）",
      confirmRevert: "撤销变更 #{0}？如果目标之后又被改过，撤销会被拒绝。", erasedEntry: "（内容已清除：删除要求或保留期满）",
      deleteEpisode: "删除", confirmDeleteEpisode: "永久删除这条情境记忆？此操作不可撤销，并从历史中清除其内容。", episodeDeleted: "已删除情境记忆",
      exportDecrypted: "导出明文（不加密：文件含全部内容，请妥善保管）",
      exportTitle: "导出", exportAll: "全部", exportGroup: "一个群", exportMember: "一位成员", download: "下载 JSON",
      importTitle: "导入", chooseFile: "选择导出文件（本插件的 JSON；LivingMemory 的 JSON、CSV 或数据库 livingmemory.db）", preview: "预览", apply: "应用导入",
      importNew: "新增", importDuplicate: "重复", importConflict: "冲突", importInvalid: "无效", importAdded: "已导入", importApplied: "导入完成", importPlatform: "文件未注明平台时用",
      importNote: "可导入的文件：本插件「下载 JSON」的导出文件（也可以是插件数据目录里一个群的记忆文件；很早版本的文件没写平台，用下面「文件未注明平台时用」一栏填的平台）；LivingMemory 的导出（JSON、CSV）和它的数据库文件 livingmemory.db（先停止 AstrBot 再复制）。「下载 CSV」得到的表格只供 Excel 查看，不能导入。先预览，再应用：每个群要么全部导入、要么不变，和其他途径一样检查 id、内容与上限（被拒绝的群写明原因）；待办的提醒改发到导入的群；成员的“不记录”设置一并导入；关闭了记录的成员的记忆不会从 LivingMemory 导入。",
      importReminders: "提醒发往", importOptedOut: "不记录的成员",
      importRemindTo: "{0}（{1} 个待办）", importRemindGroup: "群 {0}", revertRemoved: "移除了 {0} 个待办，它们的提醒不会再发",
      importMissed: "{0} 个待办的提醒时间已过，导入后记为错过，不会补发", importMissedDone: "{0} 个待办的提醒时间已过，已记为错过，不会补发",
      importResumed: "{0} 个重复待办的提醒时间已过，导入后从下一次继续", importResumedDone: "{0} 个重复待办的提醒时间已过，已改为从下一次继续",
      importFromLM: "来自 LivingMemory：会话对应到群；会话或原始对话只有一位发言者时归该成员，否则作为本群公共记忆；重要度与时间照搬。",
      importTooLong: "LivingMemory 有一条记忆长 {0} 字，超过 memory_max_content_length（{1} 字）：含过长记忆的群会被整群拒绝。可在插件设置里把它调到至少 {0}（最多 2000）后再预览。",
      unmappedTitle: "未能对应的条目：{0} 条（不会导入）", unmappedReason: "原因", unmappedCount: "条数", unmappedExamples: "例如",
      badFile: "这个文件不是 JSON，无法导入：可导入本插件「下载 JSON」的导出文件，以及 LivingMemory 的导出（JSON、CSV）和数据库文件。", badRead: "无法读取文件",
      chg_status: "状态", chg_remind_at: "提醒时间", chg_due_at: "截止", chg_assignee: "负责人", chgNone: "无",
      eraseMemories: "记忆：共 {0} 条", eraseTodos: "待办：共 {0} 条", eraseEpisodes: "情境记忆：{0} 条去掉了此人（概要中改为“某成员”）",
      eraseReattributed: "此人添加的群公共记忆：{0} 条保留，改记为前成员", eraseHeard: "最近听到的此人的消息：已从内存中清除",
      erasePerGroup: "{0}：{1} 条", eraseFailed: "未能完成的群：{0}", eraseNothing: "无",
      statsTitle: "统计", overTime: "记忆数随时间", byType: "按类型", byScope: "按范围", bySource: "按来源",
      calls: "后台模型调用", tokensIn: "输入 tokens", tokensOut: "输出 tokens", mostInjected: "最常注入的记忆",
      times: "次数", date: "日期", total: "合计",
      // issue 36: what the group talks about (topics over weeks) and who shares what (the member graph)
      topics: "话题", topicsComputing: "话题还在整理中（在后台计算，不影响机器人回复）…", topicsFailed: "话题暂时整理不出来，稍后再看。",
      topicsPickGroup: "选一个群，看它常聊的话题和成员之间的关系。",
      topicsNone: "还没有话题：一个话题至少要有 {2} 条讲同一件事的记忆（本群现有 {0}、{1}）。",
      nMemories: "{0} 条记忆", nEpisodes: "{0} 段情境记忆", nConversations: "{0} 段对话",
      topicsNote: "按 {0} 时的 {1}和 {2}计算；每周从周一开始，按 {3}。点话题看它的记忆。", topicsArchived: "另有 {0} 条已归档的单独计数。",
      topicsStale: "记忆有了变化，约半分钟后更新；下面是按 {0} 时的记忆算的。", topicsExcluded: "关闭了记录的 {0} 位成员不计入。",
      topicOther: "其他（没有归入话题的）", topicN: "话题 {0}", topicNamedBy: "模型起的名字，依据这些关键词", topicSize: "{0} 条", topicArchived: "另有 {0} 条已归档",
      unknownMember: "未知成员", topicMore: "还有 {0} 条较早的没有列出。", topicMoreMembers: " 等 {0} 人",
      weekNew: "新增", weekUsed: "最近用到", weekFaded: "淡出", weekTitle: "{0}（{1} 起）：新增 {2}、最近用到 {3}、淡出 {4}",
      tip_weekNew: "这一周新增的记忆", tip_weekUsed: "最后一次被用到是在这一周的记忆（之后又用到的算在更晚的那周）",
      tip_weekFaded: "这一周归档的，或很久没再用到而淡出的记忆", weekCaption: "第 {0} 周（{1}–{2}）：新增 {3} · 最近用到 {4} · 淡出 {5}",
      weekTotals: "合计：新增 {0} · 最近用到 {1} · 淡出 {2}", weekTap: "点一周的柱子看这一周的数字", legendUsed: "（最后一次用到在那一周）",
      graphTitle: "谁和谁有共同话题", graphEmpty: "还没有成员之间的联系：两位成员在同一话题里都有记忆、互相提到、提到同样的名字或参与过同一段对话时，才连一条线。",
      graphNote: "线越粗，两人共同的越多。点一个人或一条线，看背后的记忆。",
      edgeWhy: "{0}、提到对方 {1} 次、{2}", nTopics: "共同话题 {0} 个", nTogether: "共同参与的对话 {0} 段", edgeNames: "都提到：{0}",
      nodeTitle: "{0}：{1}、{2}", nodeMemories: "{0} 的记忆", edgeMemories: "{0} 和 {1} 之间",
      kind_group: "群公共", kind_episode: "情境记忆", noneListed: "没有可列出的记忆。",
      privacyTitle: "删除关于某人的一切",
      privacyText: "删除此人在该平台所有群里的个人记忆、全局记忆、其创建或被指派的待办和缓存的名字；他在情境记忆中的 ID 和名字（概要中改为“某成员”）；他添加的群公共记忆保留（记为前成员），情境记忆的其余内容保留。此操作不可撤销，并从历史中清除内容。",
      userId: "用户 ID 或名字", erase: "删除此人的一切", typeToConfirm: "请输入用户 ID「{0}」或名字「{1}」以确认：",
      typeIdToConfirm: "请输入用户 ID「{0}」以确认：", mismatch: "输入的 ID 或名字不一致",
      nameAndId: "{0}（{1}）", eraseWho: "将删除：{0}", eraseWhere: "其数据所在：{0}", eraseCount: "{0}（{1} 条记忆）",
      erased: "已删除：{0}", erasedPartly: "未删完：{0}。部分群读写失败，请稍后再执行一次以完成。",
      err_person_ambiguous: "{0}", err_person_unknown: "{0}", err_person_no_data: "{0}", // the server's words are Chinese
      adminNote: "任何能登录控制台的人都能查看和修改所有群的记忆。",
      globalDocument: "全局个人记忆（跨群）", leftOut: "未注入的候选",
      reason_own_instruction: "成员本人的指令", reason_group_instruction: "群规（本群部分先放）", reason_relevance: "与消息相关",
      section: "部分", section_own: "该成员自己的", section_group: "当前群组信息",
      reason_all_fit: "全部放得下", reason_recency_prior: "按类型与新近程度",
      complete: "已全部完成", reattributed: "改记为前成员的群记忆", failed: "失败的群", user_id: "用户 ID", groups: "有其数据的群（记忆条数）", heard: "最近听到的消息（内存中）",
      privacyLimits: "本插件删不到的地方：AstrBot 自己的日志和对话数据库（data/data_v4.db 里的对话记录、工具调用），以及 PostgreSQL 在 VACUUM 之前留下的旧行版本和 WAL（未开启加密时是明文）。见插件文档 docs/privacy.md 的「本插件删不到的地方」。",
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
      // issue 24: a memory's picture or document
      picture: "Picture", pictureUnnamed: "Unnamed picture", fileUnnamed: "Unnamed file", openPicture: "Click to see the full picture",
      downloadFile: "Click to download the file", downloadPicture: "Download the picture", close: "Close", pictureLoading: "Loading the picture…",
      pictureFailed: "The picture cannot be shown: {0}",
      // issue 35 item 4: every time is in the plugin's zone, said once in the header
      zoneLabel: "All times in {0} ({1})",
      // issue 20 items 5 and 8: todos, bulk edits, CSV, the chart
      todoShowClosed: "Show finished todos ({0})", todoZone: "Times in {0}", todoWho: "For", todoRemind: "Reminder",
      todoDue: "Due", todoStatus: "Status", todoDelivery: "Reminder delivery", todoCreatedBy: "Created by {0}", todoSetBy: "Set by {0}",
      todoWholeGroup: "Whole group", todoMarkDone: "Done", todoCancel: "Cancel todo", todoDoneOk: "Marked done",
      todoCancelledOk: "Todo cancelled", todoConfirmCancel: "Cancel the todo “{0}”? It will not be reminded any more.",
      todoEditTitle: "Change todo",
      todoNoRemind: "This todo's platform cannot post on its own right now, so no reminder time can be set.",
      todoRecurHint: "Repeats {0}: the time lands on the rule's next day", todoNone: "No open todos",
      todoNote: "Changes here are checked as when a member changes a todo through the todo tool (times, recurrence, text) and logged in the history as “Dashboard (<login>)”, where it can be undone (a reminder already sent is not taken back, nor sent again).",
      todo_pending: "Open", todo_done: "Done", todo_cancelled: "Cancelled", todo_expired: "Expired",
      todo_unconfirmed: "To confirm (noticed in chat; reminded once confirmed)",
      err_time_past: "That time ({when}) has already passed: pick a later one.", err_time_unreadable: "That time cannot be read: pick a date and a time in the box.",
      err_time_out_of_range: "That time is too far ahead: the end of {latest} at the latest.",
      err_time_dst_gap: "That time does not exist in {zone} (skipped by a daylight-saving change): {shifted} would do.",
      err_remind_after_due: "The reminder is after the deadline ({due}): remind before it.",
      err_remind_unavailable: "This todo's platform cannot post on its own right now, so no reminder time can be set.",
      err_remind_needed: "The planned reminder time ({when}) has passed: pick a new one to confirm this todo.",
      err_recurrence_no_day: "The repeat rule finds no next day: pick another time.", err_recurrence_invalid: "This todo's repeat rule cannot be read.",
      err_status_invalid: "The status can only be done or cancelled.", err_todo_refused: "{0}",
      err_todo_closed: "This todo is finished (done, cancelled or expired) and cannot be changed: the list was refreshed.",
      err_todo_gone: "This todo is no longer there (just removed?): the list was refreshed.",
      todoInHistory: "{0} ({1})", revertReminder_rearmed: "“{0}” will be reminded at {1} as planned", revertReminder_resumed: "“{0}” repeats again from {1} (the times missed meanwhile are not sent)",
      revertReminder_sent: "“{0}” was already reminded at {1}; it is not sent again", revertReminder_settled: "the reminder of “{0}” at {1} already ended (failed or missed); it is not sent again",
      revertReminder_past: "the reminder time of “{0}”, {1}, has passed: it is not sent late; change the reminder time to be reminded",
      delivery_sent: "Reminded ({0})", delivery_late: "Reminded late ({0})", delivery_retrying: "Sending failed, will retry",
      delivery_failed: "Sending failed ({0})", delivery_missed: "Missed ({0}, the bot was offline)", deliveryRetryAt: "next try {0}",
      deliveryWaiting: "Will remind {0}", deliveryUnconfirmed: "Reminded once confirmed", deliveryNone: "No reminder",
      rec_daily: "daily", rec_weekdays: "every weekday (Mon–Fri)", rec_weekly: "every {0}", rec_monthly: "monthly on day {0} (last day in shorter months)",
      day_mon: "Mon", day_tue: "Tue", day_wed: "Wed", day_thu: "Thu", day_fri: "Fri", day_sat: "Sat", day_sun: "Sun", listSep: ", ",
      bulkEdit: "Change selected ({0})", bulkKeep: "Unchanged", bulkTitle: "Change {0} memories",
      bulkIntro: "The {0} selected memories change together; empty fields stay as they are. The whole change is one transaction in the history: undoing any of it undoes all of it.",
      bulkToGroup: "Make the member memories among the {0} selected group memories? Every member's conversations will use them.", bulkDone: "Changed {0}",
      bulkLeftOut: "Changed {0}; {1} would pass a cap and were not moved (left as they were): {2}",
      chartTitle: "Memories per day", chartX: "Date", chartY: "Memories", chartCaption: "{0} to {1} · latest {2} · highest {3}",
      downloadCsv: "Download CSV (spreadsheet)",
      csvNote: "The CSV holds memories only (no todos, episodes or archive): group, member, scope, type, content, importance, source, created, updated; UTF-8 with a BOM, so Excel opens it as is. A CSV is plaintext: with an encryption key configured, tick “Export decrypted”.",
      title: "Memory manager", platform: "Platform", lang: "中文", all: "All", allGroups: "All groups",
      tab_browse: "Browse", tab_search: "Search", tab_recall: "Recall tester", tab_history: "History",
      tab_transfer: "Export / import", tab_stats: "Statistics", tab_privacy: "Erase a person",
      loading: "Loading…", empty: "Nothing here", error: "Error: {0}", noPlatform: "No group has memories yet",
      emptyHow: "How the first memory gets here:",
      emptyTell: "A member @-mentions the bot in a group: “remember, call me Lao Wang in this group”. Once the bot has saved it (it needs a chat model with tool calling), the group shows up here.",
      emptyWatch: "With “自动记忆：从群聊中提取” (automatic memory from group chat) on in the plugin's config, ordinary group chat yields memories too (off by default; it costs model calls).",
      emptyImport: "Have a file exported from another instance, or LivingMemory's database? Import it under “Export / import”.", emptyImportGo: "Import",
      noPlatformYet: "(none yet)", historyNothing: "No group has memories yet, so there is no history: once a group has its first memory, every change is listed here.",
      privacyNothing: "No group has memories yet, so there is nothing to erase: once a group has its first memory, a person's data can be erased here.",
      err_no_groups: "No group has memories yet, so there is nothing to erase; nothing was deleted.",
      emptySettings: "The plugin's config: Plugins → the card “Group Member Memory” → Configure. An AstrBot admin sends /memory status in a group to see the settings in effect; /memory help lists every command.",
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
      semanticRecall: "Matching by meaning: {0}",
      message: "Message", runRecall: "Try it", block: "Block that would be injected", reason: "Reason", score: "Score",
      noBlock: "This message would inject no memory", items: "Items",
      history: "Change history", when: "When", actor: "Actor", op: "Operation", kind: "Kind", target: "Target",
      refusedTitle: "Refused access (per person and kind; ids only, no content)", refusedCount: "Count", refusedFirst: "First",
      refusedLast: "Latest", refusedVia: "Via", refusedDropped: "{0} older entries are no longer kept", noRefused: "No refused access",
      audit_foreign_id: "Named another member's memory or todo", audit_group_change: "Group change without the right",
      audit_admin_command: "Admin command by a non-admin", audit_dashboard_scope: "Dashboard request out of scope",
      oldValue: "Old", newValue: "New", revert: "Revert", loadMore: "Load more",
      op_add: "Added", op_update: "Changed", op_delete: "Deleted", op_revert: "Reverted", op_archive: "Archived",
      op_restore: "Restored", op_promote: "Promoted", op_merge: "Merged", op_boost: "Importance raised", op_erase: "Erased",
      op_purge: "Deleted for good", op_remind: "Reminded", op_remind_attempt: "Reminder tried", op_remind_failed: "Reminder failed",
      op_remind_waiting: "Reminder waiting", op_missed: "Reminder missed", op_import: "Imported", op_move: "Moved",
      op_optout: "Opted out", op_optin: "Opted in", op_caption: "Picture described", op_keep: "Kept", op_done: "Done", op_cancel: "Cancelled",
      op_expire: "Expired", op_call: "Model call",
      kind_memory: "Memory", kind_todo: "Todo", kind_episode: "Episode", kind_call: "Background call", kind_privacy: "Privacy",
      kind_archive: "Archive",
      actor_extraction: "Extraction", actor_maintenance: "Maintenance", actor_review: "Review", actor_consolidation: "Consolidation",
      actor_scheduler: "Reminder scheduler", actor_dashboard: "Dashboard ({0})", actor_erase: "Erasure request", actor_import: "Import",
      actor_caption: "Picture captions", actor_admin: "Admin ({0})", actor_topics: "Topic names",
      tip_actor_topics: "The extraction model naming the statistics tab's topics (a background model call that reads only the group's shared memories and episode summaries)",
      tip_actor_dashboard: "Done on the dashboard by the login {0}", tip_actor_extraction: "The plugin extracting memories from group chat (a background model call)",
      tip_actor_maintenance: "The plugin's periodic upkeep (ageing, archiving, retention)", tip_actor_review: "The plugin's memory review (a background model call)",
      tip_actor_consolidation: "The plugin merging similar memories (a background model call)", tip_actor_caption: "The plugin describing a picture (a background model call)",
      tip_actor_scheduler: "The plugin's reminder scheduler: it posts a todo's reminder in the group when due and records how it went", tip_actor_erase: "An admin's “erase a person” request",
      tip_actor_import: "An import from a file", tip_op_revert: "Reverted an earlier change (see old and new)",
      tip_op_remind: "The reminder was posted in the group", tip_op_remind_attempt: "A reminder is being sent: recorded first, so a restart never sends it twice",
      tip_op_remind_failed: "The reminder could not be sent (the plugin's log says why)", tip_op_remind_waiting: "The reminder is due but its platform is not connected yet: it is sent once it is",
      tip_op_missed: "The bot was offline too long when the reminder was due: it is not sent late", tip_op_expire: "Still open past its deadline: the todo ended by itself",
      tip_op_purge: "A closed todo or an archived memory past its retention, removed from the file", tip_op_erase: "Its content was cleared when a person was erased",
      revertedBy: "Reverted (#{0}, {1})",
      changeNo: "Change no.", tip_changeNo: "The number /memory revert takes. Numbers skip: the model calls' usage records are numbered too, but they are not changes and are not listed here.",
      todoStatus: "Status", assignee: "Assignee",             epSummary: "Summary", epParticipants: "Participants", epStart: "Start", epEnd: "End",
      memberFilter: "Member (name or id)",
      relevance: "Match", relevanceHint: "How well it matches the keywords: 100% means every word is in this memory, and weighs much",
      err_content_empty: "The content cannot be empty.", err_content_too_long: "The content is too long: {length} characters, at most {max}.",
      err_importance_range: "Importance must be a number from 0 to 1.", err_type_invalid: "Choose a type.",
      err_duplicate: "This member already has a memory with the same content ({id}): edit or delete that one.",
      err_memory_gone: "This memory is no longer there (just deleted or moved?): the list was refreshed.",
      err_nothing_changed: "Nothing was changed.", err_member_unknown: "There is no member “{member}” in this group.",
      err_group_unknown: "There are no memories of group “{group}” (deleted?).", err_revert_refused: "This change cannot be reverted: {0}",
      err_already_reverted: "This change was already reverted (#{by}, {who})",
      confirmRevert: "Revert change #{0}? It is refused if the target changed since.", erasedEntry: "(content erased: on request or at the end of its retention)",
      deleteEpisode: "Delete", confirmDeleteEpisode: "Delete this episode for good? This cannot be undone and purges its content from history.", episodeDeleted: "Episode deleted",
      exportDecrypted: "Export decrypted (plaintext: holds every content; keep it safe)",
      exportTitle: "Export", exportAll: "Everything", exportGroup: "One group", exportMember: "One member",
      download: "Download JSON", importTitle: "Import", chooseFile: "Choose an export file (this plugin's JSON; LivingMemory's JSON, CSV or database livingmemory.db)", preview: "Preview",
      apply: "Apply import", importNew: "New", importDuplicate: "Duplicate", importConflict: "Conflicting", importInvalid: "Invalid", importAdded: "Added",
      importApplied: "Import applied", importPlatform: "Platform for files that name none",
      importNote: "Files it takes: this plugin's export from “Download JSON” (or one group's memory file from the plugin's data directory; a file of a very early version names no platform: the one in “Platform for files that name none” below is used); LivingMemory's exports (JSON, CSV) and its database file livingmemory.db (stop AstrBot before copying it). The table from “Download CSV” is for Excel only and cannot be imported. Preview, then apply: each group is imported whole or not at all, with ids, contents and caps checked like every other path (a refused group says why); todos' reminders go to the group imported into; members' opt-outs are imported too; memories of members who opted out are not imported from LivingMemory.",
      importReminders: "Reminders go to", importOptedOut: "Opted-out members",
      importRemindTo: "{0} (todos: {1})", importRemindGroup: "group {0}", revertRemoved: "Todos removed: {0}; their reminders will not be sent",
      importMissed: "Todos whose reminder time has passed: {0}. Imported, they are recorded as missed, not sent late",
      importMissedDone: "Todos whose reminder time had passed: {0}. Recorded as missed, not sent late",
      importResumed: "Recurring todos whose reminder time has passed: {0}. Imported, they go on at their next time",
      importResumedDone: "Recurring todos whose reminder time had passed: {0}. They go on at their next time",
      importFromLM: "From LivingMemory: sessions map to groups; a memory whose session or source conversation has one speaker goes to that member, any other to the group's shared memories; importance and times are kept.",
      importTooLong: "A LivingMemory memory is {0} characters long, over memory_max_content_length ({1}): a group holding one is refused whole. Raise the setting to at least {0} (at most 2000) and preview again.",
      unmappedTitle: "Not mapped: {0} (not imported)", unmappedReason: "Reason", unmappedCount: "Count", unmappedExamples: "For example",
      badFile: "This file is not JSON and cannot be imported: import takes this plugin's export from “Download JSON” and LivingMemory's exports (JSON, CSV) and database file.", badRead: "The file cannot be read",
      chg_status: "status", chg_remind_at: "reminder", chg_due_at: "due", chg_assignee: "assignee", chgNone: "none",
      eraseMemories: "Memories: {0} in all", eraseTodos: "Todos: {0} in all", eraseEpisodes: "Episodes: the person was taken out of {0} (summaries say “a member”)",
      eraseReattributed: "Group memories they added: {0} kept, now by a former member", eraseHeard: "Their recent messages heard: dropped from memory",
      erasePerGroup: "{0}: {1}", eraseFailed: "Not finished in: {0}", eraseNothing: "none",
      statsTitle: "Statistics", overTime: "Memories over time", byType: "By type", byScope: "By scope",
      bySource: "By source", calls: "Background model calls", tokensIn: "Input tokens", tokensOut: "Output tokens",
      mostInjected: "Most injected memories", times: "Times", date: "Date", total: "Total",
      topics: "Topics", topicsComputing: "Topics are being worked out (in the background; replies are not slowed)…", topicsFailed: "Topics could not be worked out just now; look again later.",
      topicsPickGroup: "Choose a group to see what it talks about and who shares what.",
      topicsNone: "No topics yet: a topic needs at least {2} memories about the same thing (this group has {0} and {1}).",
      topicsNote: "Computed at {0} from {1} and {2}; weeks start on Monday, in {3}. Click a topic to see its memories.", topicsArchived: "{0} archived ones are counted apart.",
      topicsArchived_one: "1 archived one is counted apart.", nMemories: "{0} memories", nMemories_one: "1 memory", nEpisodes: "{0} episodes", nEpisodes_one: "1 episode",
      topicsStale: "Memories changed: updated in about half a minute; below is what the memories of {0} give.", topicsExcluded: "{0} members who opted out are not counted.", topicsExcluded_one: "1 member who opted out is not counted.",
      topicOther: "Other (in no topic)", topicN: "Topic {0}", topicNamedBy: "Named by the model from these terms", topicSize: "{0} memories", topicSize_one: "1 memory", topicArchived: "{0} more archived",
      unknownMember: "Unknown member", topicMore: "{0} older ones not listed.", topicMoreMembers: " and others ({0} in all)",
      weekNew: "new", weekUsed: "last used", weekFaded: "faded", weekTitle: "{0} (from {1}): {2} new, {3} last used, {4} faded",
      tip_weekNew: "Memories added that week", tip_weekUsed: "Memories whose last use fell in that week (used again later: counted in the later week)",
      tip_weekFaded: "Memories archived that week, or faded after long without use", weekCaption: "Week {0} ({1}–{2}): {3} new · {4} last used · {5} faded",
      weekTotals: "In all: {0} new · {1} last used · {2} faded", weekTap: "Tap a week's bars to see its numbers", legendUsed: " (last use in that week)",
      graphTitle: "Who shares what", graphEmpty: "No links between members yet: two members are linked when both have memories in one topic, mention each other, name the same things or took part in one conversation.",
      graphNote: "The thicker the line, the more two people share. Click a person or a line to see the memories behind it.",
      edgeWhy: "{0}, mentions: {1}, {2}", edgeNames: "Both mention: {0}",
      nTopics: "{0} shared topics", nTopics_one: "1 shared topic", nTogether: "{0} conversations together", nTogether_one: "1 conversation together",
      nodeTitle: "{0}: {1}, {2}", nConversations: "{0} conversations", nConversations_one: "1 conversation", nodeMemories: "{0}'s memories", edgeMemories: "Between {0} and {1}",
      kind_group: "Group", kind_episode: "Episode", noneListed: "No memories to list.",
      privacyTitle: "Delete everything about one person",
      privacyText: "Deletes the person's member and global memories in every group of the platform, the todos they created or were assigned, and their cached name; their id and names in the episodes (a summary says “a member” / 某成员 instead); group memories they added stay (attributed to a former member), and so does the rest of each episode. This cannot be undone and purges the content from history.",
      userId: "User id or name", erase: "Delete everything about this person", typeToConfirm: "Type the user id “{0}” or the name “{1}” to confirm:",
      typeIdToConfirm: "Type the user id “{0}” to confirm:", mismatch: "The id or name does not match",
      nameAndId: "{0} ({1})", eraseWho: "About to erase: {0}", eraseWhere: "Their data is in: {0}", eraseCount: "{0} ({1} memories)",
      erased: "Erased: {0}", erasedPartly: "Not finished: {0}. Some groups could not be read or written: run it again later to finish.",
      err_person_ambiguous: "{count} members are called “{who}”; nothing was deleted. Type the user id of one of them: {candidates_en}",
      err_person_unknown: "Nobody found for “{who}”: no data under that user id on this platform, and no member by that name; nothing was deleted. Similar members, if any: {candidates_en}",
      err_person_no_data: "Nothing about this member to erase: {who_en}; nothing was deleted.",
      adminNote: "Anyone who can log in to the dashboard can see and change every group's memories.",
      globalDocument: "Global member memories (all groups)", leftOut: "Candidates left out",
      reason_own_instruction: "The member's own instruction", reason_group_instruction: "Group instruction (first in the group's section)",
      section: "Section", section_own: "The member's own", section_group: "Group information",
      reason_relevance: "Relevant to the message", reason_all_fit: "Everything fit", reason_recency_prior: "Type and recency",
      complete: "Complete", reattributed: "Group memories now by a former member", failed: "Failed groups", user_id: "User id", groups: "Groups with their data (memories)", heard: "Recent messages heard (in memory)",
      privacyLimits: "What this plugin cannot reach: AstrBot's own log and conversation database (the conversations and tool calls in data/data_v4.db), and PostgreSQL's dead row versions and WAL until VACUUM (plaintext without encryption). See “What the plugin cannot erase” in the plugin's docs/en/privacy.md.",
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
    zone: null, // {name, offset, offset_minutes}: the plugin's zone, every time on the page is shown in it
    openGroup: null, // {platform, group_id}
    groupDetail: null,
    statsGroup: "", // the group the statistics tab shows (kept when the tab is drawn again)
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
    return inZone(d);
  }

  // In the plugin's zone whatever the browser's (the bot's replies, todos and the CSV use it too); a zone name this
  // browser does not know is shown at the zone's offset now.
  function inZone(d) {
    try {
      return stamp(d, (state.zone && state.zone.name) || undefined);
    } catch {
      return stamp(new Date(d.getTime() + (Number(state.zone.offset_minutes) || 0) * 60000), "UTC");
    }
  }

  // Every time on the page is written one way, in both languages: 2026/12/06 23:44 (zero-padded, 24-hour, no
  // seconds: the change number orders a minute's changes, and the bot's replies say minutes too).
  function stamp(d, zone) {
    const parts = Object.fromEntries(new Intl.DateTimeFormat("en-CA", { timeZone: zone, hourCycle: "h23",
      year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit" })
      .formatToParts(d).map((p) => [p.type, p.value]));
    return `${parts.year}/${parts.month}/${parts.day} ${parts.hour}:${parts.minute}`;
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
    if (typeof v === "object" && typeof v.content === "string" && typeof v.status === "string") // a todo: its state too
      return t("todoInHistory", v.content, t(v.status === "pending" && v.confirmed === false ? "todo_unconfirmed" : `todo_${v.status}`));
    if (typeof v === "object" && typeof v.content === "string") return v.content;
    if (typeof v === "object" && typeof v.summary === "string") return v.summary;  // an episode
    if (Array.isArray(v) && v.every((x) => typeof x !== "object")) return v.join("、");
    return JSON.stringify(v);
  }

  // ---------- names, not ids: a person or group by the name the plugin knows, its id in the tooltip ----------
  function person(name, id, fallback = "") {
    if (!id) return el("span", {}, fallback);
    return el("span", { class: "person", title: id, "data-id": id }, name || id);
  }

  function groupOf(platform, id) {
    return state.groups.find((g) => g.group_id === id && (!platform || g.platform === platform));
  }

  // A group by its name where the platform gives one, with its id on a small second line.
  function groupCell(platform, id) {
    if (!id) return t("globalDocument");
    const name = groupOf(platform, id)?.name;
    return name ? [el("span", { class: "group-name" }, name), el("div", { class: "muted small mono" }, id)]
      : el("span", { class: "mono" }, id);
  }

  function groupOptionLabel(g) { return g.name ? `${g.name} · ${g.group_id}` : g.group_id; }

  // Who made a change: a member by name, the plugin's own jobs and the dashboard in words.
  // Its tooltip says what that actor is in words (a member's: their id), never the actor's code.
  function actorCell(actor, name) {
    const a = String(actor ?? "");
    if (a.startsWith("admin:")) return el("span", { title: a.slice("admin:".length) }, actorText(a, name)); // 管理员（老王）
    if (name) return person(name, a);
    if (a.startsWith("dashboard:")) return el("span", { title: t("tip_actor_dashboard", a.slice("dashboard:".length)) }, actorText(a));
    if (STRINGS.zh[`actor_${a}`]) return el("span", { title: t(`tip_actor_${a}`) }, actorText(a));
    return el("span", { class: a ? "mono small" : "" }, a);
  }

  function actorText(actor, name) {
    const a = String(actor ?? "");
    if (a.startsWith("admin:")) return t("actor_admin", name || a.slice("admin:".length));
    if (name) return name;
    if (a.startsWith("dashboard:")) return t("actor_dashboard", a.slice("dashboard:".length));
    return STRINGS.zh[`actor_${a}`] ? t(`actor_${a}`) : a;
  }

  function words(prefix, value) {
    const key = `${prefix}_${value}`;
    return STRINGS.zh[key] ? t(key) : String(value ?? "");
  }

  // The notice sits in the page's flow under the tabs (its room always kept, so nothing moves): it never covers a
  // control. A new tab clears it: an old error does not outlive its tab, nor the next action (`api.post`,
  // `staleError`), so a later success never shows under an error it superseded.
  function notify(message, kind = "ok") {
    const box = document.getElementById("notice");
    box.textContent = message;
    box.className = `notice shown ${kind}`;
    box.hidden = false;
    clearTimeout(notify.timer);
    notify.timer = setTimeout(clearNotice, kind === "ok" ? 3000 : 8000);
  }

  function staleError() {
    if (document.getElementById("notice").classList.contains("error")) clearNotice();
  }

  function clearNotice() {
    clearTimeout(notify.timer);
    const box = document.getElementById("notice");
    box.textContent = "";
    box.className = "notice";
  }

  // The server's refusals come as "[code|name=value|...] message" (the message is written for the model): a known
  // code is worded for a person in the page's language; otherwise the message without its code.
  function refusal(e) {
    const raw = (e && e.message) || String(e);
    const m = /^\[([a-z_]+)((?:\|[^|\]]*)*)\]\s*([\s\S]*)$/.exec(raw);
    if (!m) return { code: "", text: raw, params: {} };
    const params = {};
    m[2].split("|").filter(Boolean).forEach((p) => { const i = p.indexOf("="); params[p.slice(0, i)] = p.slice(i + 1); });
    const key = `err_${m[1]}`;
    if (!(STRINGS[state.lang][key] || STRINGS.zh[key])) return { code: m[1], text: m[3], params };
    if ("actor" in params) params.who = actorText(params.actor, params.name); // who did it, in the page's words
    let text = t(key, m[3]);
    for (const [k, v] of Object.entries(params)) text = text.split(`{${k}}`).join(v);
    return { code: m[1], text, params };
  }

  function errorText(e) { return t("error", refusal(e).text); }

  // ---------- server ----------
  const api = {
    get(route, params) {
      const clean = {};
      for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") clean[k] = v;
      return bridge.apiGet(route, clean);
    },
    post(route, body) { staleError(); return bridge.apiPost(route, body || {}); }, // a new action: an old error goes
  };

  // ---------- dialogs (window.confirm is blocked in the sandboxed iframe) ----------
  function dialog(title, body, buttons) {
    const dlg = document.getElementById("dialog");
    const form = clear(document.getElementById("dialog-form"));
    form.noValidate = true; // ranges are checked by the page, in its language
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
    if (requireText && ![].concat(requireText).includes(input.value.trim())) { notify(t("mismatch"), "error"); return false; }
    return true;
  }

  // ---------- a memory's picture or document (issue 24) ----------
  // The bytes come through the bridge: apiGet answers JSON only, so the route is asked for base64 (as=json) and a
  // picture is shown from a data: URL of one of the four image types the server serves inline, never any other;
  // a document is only ever downloaded (the bridge's download() takes the route's bytes as they are).
  const SHOWN_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
  const thumbs = new Map(); // "<platform>|<group>|<sha>" -> data: URL (or a promise of it), for this page's life

  function fileParams(m, query, more) {
    return { platform: m.platform || query.platform, group_id: m.group_id ?? query.group_id, scope: m.scope,
      owner: m.owner ?? "", id: m.id, sha256: m.attachment.sha256, ...(more || {}) };
  }

  function fmtSize(n) {
    if (typeof n !== "number") return "";
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${Math.round(n / 1024)} KB`;
    return `${(n / (1024 * 1024)).toFixed(1)} MB`;
  }

  function dataUrl(r) {
    return r && SHOWN_TYPES.includes(r.mime) && r.inline && typeof r.data === "string" ? `data:${r.mime};base64,${r.data}` : null;
  }

  function fileCaption(a) {
    const name = a.name || t(a.kind === "image" ? "pictureUnnamed" : "fileUnnamed");
    return [name, fmtSize(a.size), a.width && a.height ? `${a.width}×${a.height}` : ""].filter(Boolean).join(" · ");
  }

  function attachmentBox(m, query) {
    const a = m.attachment;
    if (!a || !a.sha256) return null;
    if (a.kind !== "image") {
      return el("div", { class: "attachment" },
        el("button", { type: "button", class: "ghost file-chip", "data-testid": "attachment-file", title: t("downloadFile"),
          onclick: () => downloadFile(m, query) }, el("span", { class: "file-icon", "aria-hidden": "true" }, "📄"), fileCaption(a)));
    }
    const img = el("img", { class: "thumb", alt: a.name || t("picture"), "data-testid": "attachment-thumb" });
    const key = `${m.platform || query.platform}|${m.group_id ?? query.group_id}|${a.sha256}`;
    if (!thumbs.has(key)) {
      thumbs.set(key, api.get("attachment", fileParams(m, query, { thumb: 1, as: "json" })).then(dataUrl).catch(() => {
        thumbs.delete(key); // asked again next time the list is drawn
        return null;
      }));
    }
    Promise.resolve(thumbs.get(key)).then((url) => { if (url) img.src = url; else img.classList.add("broken"); });
    return el("div", { class: "attachment" },
      el("button", { type: "button", class: "thumb-button", title: t("openPicture"), "aria-label": t("openPicture"),
        onclick: () => openPicture(m, query) }, img),
      el("div", { class: "muted small" }, fileCaption(a)));
  }

  async function downloadFile(m, query) {
    const a = m.attachment;
    try { await bridge.download("attachment", fileParams(m, query), a.name || a.sha256.slice(0, 12)); }
    catch (e) { notify(errorText(e), "error"); }
  }

  async function openPicture(m, query) {
    const a = m.attachment;
    const holder = el("div", { class: "picture-view", "data-testid": "picture-view" }, el("p", { class: "muted" }, t("pictureLoading")));
    api.get("attachment", fileParams(m, query, { as: "json" })).then((r) => {
      const url = dataUrl(r);
      clear(holder).appendChild(url ? el("img", { src: url, alt: a.name || t("picture"), "data-testid": "picture-full" })
        : el("p", { class: "error" }, t("pictureFailed", "")));
    }).catch((e) => { clear(holder).appendChild(el("p", { class: "error" }, t("pictureFailed", refusal(e).text))); });
    const answer = await dialog(fileCaption(a), holder, [
      { value: "download", label: t("downloadPicture"), class: "ghost" },
      { value: "close", label: t("close") },
    ]);
    if (answer === "download") await downloadFile(m, query);
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
      const bulkBtn = el("button", { type: "button", class: "ghost", id: "bulk-edit", disabled: true,
        onclick: () => bulkEdit([...selected.values()], ref, opts.members, load) }, t("bulkEdit", 0));
      const updateDel = () => { delBtn.disabled = selected.size === 0; delBtn.textContent = t("deleteSelected", selected.size);
        bulkBtn.disabled = selected.size === 0; bulkBtn.textContent = t("bulkEdit", selected.size); };
      const all = el("input", { type: "checkbox", "aria-label": t("selectAll"), onchange: (ev) => {
        root.querySelectorAll("input.pick").forEach((cb) => { cb.checked = ev.target.checked; cb.dispatchEvent(new Event("change")); });
      } });
      const showGroup = !query.group_id;
      const showScore = lastItems.some((m) => typeof m.score === "number");
      const head = el("tr", {}, el("th", {}, all), showGroup && el("th", {}, t("group")),
        showScore && el("th", { title: t("relevanceHint") }, t("relevance")), el("th", {}, t("content")),
        el("th", {}, t("type")), el("th", {}, t("importance")), el("th", {}, t("scope")), el("th", {}, t("source")),
        el("th", {}, t("updated")), el("th", {}, t("actions")));
      const rows = lastItems.map((m) => {
        const pick = el("input", { type: "checkbox", class: "pick", onchange: (ev) => {
          if (ev.target.checked) selected.set(keyOf(m), m); else selected.delete(keyOf(m));
          updateDel();
        } });
        const owner = m.scope === "group" || !m.owner ? null : person(m.owner_name, m.owner);
        return el("tr", { "data-id": m.id },
          el("td", {}, pick),
          showGroup && el("td", {}, groupCell(m.platform || query.platform, m.group_id)),
          showScore && el("td", { class: "num score", title: t("relevanceHint") },
            typeof m.score === "number" ? `${Math.round(m.score * 100)}%` : ""),
          el("td", { class: "content" }, m.content ?? "", attachmentBox(m, query)),
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
        el("div", { class: "toolbar" }, delBtn, bulkBtn),
        lastItems.length ? el("table", { class: "table" }, el("thead", {}, head), el("tbody", {}, rows))
          : el("p", { class: "muted" }, t("empty")),
        el("div", { class: "pager" },
          el("button", { type: "button", class: "ghost", disabled: page <= 1, onclick: () => { page -= 1; load(); } }, t("prev")),
          el("span", {}, t("pageOf", page, pages, total)),
          el("button", { type: "button", class: "ghost", disabled: page >= pages, onclick: () => { page += 1; load(); } }, t("next"))),
      ]);
    }

    // The dialog stays open (reopened with what was typed) until the server takes the edit or the person cancels;
    // a refusal is shown in it, worded for a person. The range is checked here, in the page's language.
    async function edit(m) {
      const content = el("textarea", { rows: 4, class: "wide", name: "content" });
      content.value = m.content ?? "";
      const type = el("select", { name: "type" }, TYPES.map((v) => option(v, label("type", v), v === m.type)));
      const importance = el("input", { type: "number", name: "importance", min: 0, max: 1, step: 0.05, value: m.importance ?? 0.5 });
      const problem = el("p", { class: "error", id: "edit-error", role: "alert", hidden: true });
      const body = el("div", { class: "form" },
        el("label", {}, t("content"), content),
        el("label", {}, t("type"), type),
        el("label", {}, t("importance"), importance, el("span", { class: "muted small" }, t("importanceHint"))), problem);
      const say = (text) => { problem.textContent = text; problem.hidden = !text; };
      for (;;) {
        const answer = await dialog(t("editTitle"), body, [
          { value: "cancel", label: t("cancel"), class: "ghost" }, { value: "save", label: t("save") }]);
        if (answer !== "save") return;
        const value = importance.value.trim() === "" ? NaN : Number(importance.value);
        if (!Number.isFinite(value) || value < 0 || value > 1) { say(t("err_importance_range")); continue; }
        if (!content.value.trim()) { say(t("err_content_empty")); continue; }
        try {
          await api.post("memory/edit", { ...ref(m), content: content.value, type: type.value, importance: value });
        } catch (e) {
          const r = refusal(e);
          say(r.code ? r.text : errorText(e));
          if (r.code === "memory_gone") { notify(r.text, "error"); await changed(); return; }
          continue;
        }
        notify(t("saved"));
        await changed();
        return;
      }
    }

    // After a change: the list again, and whoever shows counts (the group's chips, the group list).
    async function changed() {
      await load();
      if (opts.onChange) await opts.onChange();
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
      await changed();
    }

    async function move(m) {
      const body = { ...ref(m), confirm: true };
      if (m.scope === "member") {
        if (!(await confirmDialog(t("moveToGroup")))) return;

      } else {
        const members = opts.members || [];
        const pick = members.length
          ? el("select", { class: "wide" }, members.map((u) => option(u.id, u.name ? `${u.name} · ${u.id}` : u.id)))
          : el("input", { type: "text", class: "wide", placeholder: t("memberId") });
        const answer = await dialog(t("move"), el("div", {}, el("p", {}, t("moveToMember")), pick), [
          { value: "cancel", label: t("cancel"), class: "ghost" }, { value: "ok", label: t("confirm") }]);
        if (answer !== "ok" || !pick.value.trim()) return;
        body.member = pick.value.trim();
      }
      try {
        await api.post("memory/move", body);
        notify(t("moved"));
        await changed();
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
    if (r && r.zone && r.zone.name) state.zone = r.zone;
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
      groups.filter((g) => g.group_id).map((g) => option(g.group_id, groupOptionLabel(g))));
  }

  async function renderBrowse(view) {
    await state.groupsLoading; // a revert's refresh still under way would leave its old counts on screen
    if (state.openGroup) return renderGroup(view, state.openGroup);
    const groups = groupsOfPlatform();
    if (!groups.length) { view.appendChild(emptyStart()); return; }
    const head = el("tr", {}, [state.platform ? null : t("platform"), t("group"), t("members"), t("memories"),
      t("groupMemories"), t("todos"), t("episodes"), t("archived"), t("lastChange"), ""].filter((h) => h !== null)
      .map((h) => el("th", {}, h)));
    const rows = groups.map((g) => el("tr", { class: "clickable", "data-group": g.group_id, onclick: () => openGroup(g) },
      !state.platform && el("td", {}, g.platform),
      el("td", { "data-col": "group" }, groupCell(g.platform, g.group_id)),
      el("td", { class: "num", "data-col": "members" }, fmtNum(g.members)),
      el("td", { class: "num", "data-col": "memories" }, fmtNum(g.memories)),
      el("td", { class: "num" }, fmtNum(g.group_memories)), el("td", { class: "num" }, fmtNum(g.todos)),
      el("td", { class: "num" }, fmtNum(g.episodes)), el("td", { class: "num" }, fmtNum(g.archived)),
      el("td", { class: "small" }, fmtTime(g.last_change)),
      el("td", {}, el("button", { type: "button", class: "ghost" }, t("open")))));
    append(view, [el("p", { class: "muted small" }, t("adminNote")),
      el("table", { class: "table", id: "groups-table" }, el("thead", {}, head), el("tbody", {}, rows))]);
  }

  // No group yet (a fresh instance, or a platform without one): how a first memory gets here, where the settings are.
  function emptyStart() {
    return el("section", { class: "card", id: "empty-start" }, el("h2", {}, t("noPlatform")), el("p", {}, t("emptyHow")),
      el("ul", {}, el("li", {}, t("emptyTell")), el("li", {}, t("emptyWatch")), el("li", {}, t("emptyImport"), " ",
        el("button", { type: "button", class: "ghost", id: "empty-import", onclick: () => show("transfer") }, t("emptyImportGo")))),
      el("p", { class: "muted small" }, t("emptySettings")));
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
    const base = { platform: g.platform, group_id: g.group_id };
    const listBox = el("div", {});
    const countsLine = el("p", { class: "muted", id: "group-counts" });
    const chips = el("div", { class: "chips", id: "member-chips" });
    const chipFilter = el("input", { type: "search", id: "member-filter", placeholder: t("memberFilter") });
    let members = [];
    const showList = (q) => clear(listBox).appendChild(memoryList({ ...base, ...q }, { members, onChange: refresh }));
    // The counts and the member chips as the server has them now (after an edit, delete, move or undo too).
    const drawPeople = () => {
      const counts = detail.counts || detail.scopes || {};
      countsLine.textContent = Object.entries(counts).map(([k, v]) => `${SCOPES.includes(k) ? label("scope", k) : t(k)} ${fmtNum(v)}`).join(" · ");
      members = asList(detail.members ?? detail, "members");
      const wanted = chipFilter.value.trim().toLowerCase();
      const shown = members.filter((u) => !wanted || u.id.toLowerCase() === wanted || (u.name || u.id).toLowerCase().includes(wanted));
      clear(chips);
      append(chips, shown.length ? shown.map((u) => el("button", { type: "button", class: "chip", title: u.id, "data-member": u.id,
        onclick: () => showList({ scope: "member", member: u.id }) },
        u.name || u.id, el("span", { class: "muted small" }, ` ${fmtNum(u.memories ?? u.count ?? "")}`))) : [el("span", { class: "muted" }, t("empty"))]);
    };
    async function refresh() {
      try {
        detail = await api.get("group", g);
        drawPeople();
        await refreshGroups();
      } catch (e) { notify(errorText(e), "error"); }
    }
    chipFilter.addEventListener("input", drawPeople);
    drawPeople();
    const scopeButtons = el("div", { class: "toolbar" },
      el("button", { type: "button", class: "chip", onclick: () => showList({}) }, t("all")),
      SCOPES.map((s) => el("button", { type: "button", class: "chip", "data-scope": s, onclick: () => showList({ scope: s }) }, label("scope", s))));
    append(view, [
      backButton(),
      el("h2", { id: "group-title" }, detail.name || `${t("group")} ${g.group_id}`,
        el("span", { class: "muted small" }, detail.name ? ` · ${g.group_id} · ${g.platform}` : ` · ${g.platform}`)),
      countsLine,
      el("h3", {}, t("membersOf")), el("div", { class: "filters" }, chipFilter), chips,
      el("h3", {}, t("memories")), scopeButtons, listBox,
      el("h3", {}, t("todos")), todoPanel(base),
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
      el("thead", {}, el("tr", {}, [t("epSummary"), t("epParticipants"), t("epStart"), t("epEnd"), ""].map((k) => el("th", {}, k)))),
      el("tbody", {}, items.map((e) => el("tr", { "data-episode": e.id },
        el("td", { class: "content" }, text(e.summary)), el("td", {}, text(e.participant_names)),
        el("td", { class: "small" }, fmtTime(e.start)), el("td", { class: "small" }, fmtTime(e.end)),
        el("td", {}, el("button", { type: "button", class: "ghost danger-text", onclick: () => remove(e) }, t("deleteEpisode")))))));
  }

  function backButton() {
    return el("button", { type: "button", class: "ghost", id: "back", onclick: () => { state.openGroup = null; show("browse"); } }, t("back"));
  }

  // ---------- Search ----------
  function renderSearch(view) {
    const group = groupSelect(true);
    const q = el("input", { type: "search", name: "q", placeholder: t("query"), class: "grow" });
    const scope = el("select", { name: "scope" }, option("", `${t("scope")}: ${t("all")}`), SCOPES.map((s) => option(s, label("scope", s))));
    const type = el("select", { name: "type" }, option("", `${t("type")}: ${t("all")}`), TYPES.map((s) => option(s, label("type", s))));
    const source = el("select", { name: "source" }, option("", `${t("source")}: ${t("all")}`), SOURCES.map((s) => option(s, label("source", s))));
    const member = el("input", { type: "text", name: "member", placeholder: t("memberFilter"), list: "search-members" });
    const known = el("datalist", { id: "search-members" });
    group.addEventListener("change", async () => {
      clear(known);
      if (!group.value) return;
      try {
        const d = await api.get("group", { platform: state.platform, group_id: group.value });
        asList(d.members ?? d, "members").forEach((u) => known.appendChild(option(u.name || u.id, u.name ? `${u.name} · ${u.id}` : u.id)));
      } catch { /* the list is a convenience: the filter works without it */ }
    });
    const sort = el("select", { name: "sort" }, ["relevance", "updated", "created", "importance", "last_used"].map((s) => option(s, `${t("sort")}: ${t(`sort_${s}`)}`)));
    const results = el("div", {});
    const run = (ev) => {
      if (ev) ev.preventDefault();
      clear(results).appendChild(memoryList({ platform: state.platform, group_id: group.value, q: q.value.trim(),
        scope: scope.value, type: type.value, source: source.value, member: member.value.trim(), sort: sort.value }));
    };
    append(view, [el("form", { class: "filters", id: "search-form", onsubmit: run }, group, q, scope, type, source, member, known, sort,
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
          asList(r.left_out).length ? [el("h3", {}, t("leftOut")), recallItems(asList(r.left_out), "recall-left-out")] : null,
          r.semantic_recall ? el("p", { class: "note", id: "semantic-recall" }, t("semanticRecall", r.semantic_recall)) : null]);
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
      el("thead", {}, el("tr", {}, [t("content"), t("type"), t("scope"), t("section"), t("reason"), t("score")].map((h) => el("th", {}, h)))),
      el("tbody", {}, items.map((i) => {
        const m = i.memory || i;
        const reason = i.reason ? label("reason", i.reason) : "";
        return el("tr", {},
          el("td", { class: "content" }, text(m.content ?? m.text ?? m)),
          el("td", {}, label("type", m.type ?? i.type ?? "")),
          el("td", {}, label("scope", m.scope ?? i.scope ?? i.kind ?? "")),
          el("td", {}, i.section ? label("section", i.section) : ""),
          el("td", {}, reason),
          el("td", { class: "num" }, fmtNum(i.score ?? "")));
      })));
  }

  // ---------- History ----------
  // What an edit changed besides the text (a bulk edit changes only these): "类型 事实 → 指令，重要度 0.5 → 0.9".
  function changesLine(changes) {
    const list = asList(changes);
    if (!list.length) return null;
    const names = { type: t("type"), importance: t("importance"), source: t("source"), status: t("chg_status"),
      remind_at: t("chg_remind_at"), due_at: t("chg_due_at"), assignee: t("chg_assignee") };
    const value = (field, v) => {
      if (v === undefined || v === null || v === "") return t(field === "assignee" ? "todoWholeGroup" : "chgNone");
      if (field === "importance") return typeof v === "number" ? String(Math.round(v * 1000) / 1000) : String(v); // 0.5, as entered
      if (field === "remind_at" || field === "due_at") return fmtTime(v);
      const prefix = { type: "type", source: "source", status: "todo" }[field];
      return prefix ? label(prefix, v) : String(v);
    };
    const parts = list.map((c) => `${names[c.field] || c.field} ${value(c.field, c.old)} → ${value(c.field, c.new)}`);
    return el("div", { class: "changes small" }, parts.join(state.lang === "zh" ? "，" : ", "));
  }

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
        el("thead", {}, el("tr", {}, [t("changeNo"), t("when"), t("actor"), t("kind"), t("op"), t("target"), t("oldValue"), t("newValue"), ""]
          .map((h, i) => el("th", i ? {} : { title: t("tip_changeNo") }, h)))),
        el("tbody", {}, entries.map((e) => el("tr", { "data-entry": e.id },
          el("td", { class: "num" }, e.id), el("td", { class: "small" }, fmtTime(e.at)), el("td", { class: "actor" }, actorCell(e.actor, e.actor_name)),
          el("td", {}, words("kind", e.kind)), el("td", { class: "op", title: STRINGS.zh[`tip_op_${e.op}`] ? t(`tip_op_${e.op}`) : "" }, words("op", e.op)),
          el("td", { class: "small" }, [e.scope && label("scope", e.scope), e.owner && person(e.owner_name, e.owner), e.target && el("span", { class: "muted mono", title: e.target }, String(e.target).slice(0, 8))]
            .filter(Boolean).flatMap((x, i) => (i ? [" · ", x] : [x]))),
          el("td", { class: "content" }, e.erased ? t("erasedEntry") : text(e.old)),
          el("td", { class: "content" }, e.erased ? "" : text(e.new), changesLine(e.changes)),
          el("td", {}, e.reverted_by ? el("span", { class: "muted small reverted-by" }, t("revertedBy", e.reverted_by.id, actorText(e.reverted_by.actor, e.reverted_by.actor_name)))
            : e.kind !== "call" && !e.erased && e.revertable !== false &&
            el("button", { type: "button", class: "ghost", onclick: () => revert(e) }, t("revert"))))))),
      hasMore && el("button", { type: "button", class: "ghost", onclick: () => load(true) }, t("loadMore"))]);
    };
    const revert = async (e) => {
      if (!(await confirmDialog(t("confirmRevert", e.id)))) return;
      try {
        const r = await api.post("history/revert", { platform: state.platform, group_id: group.value, entry_id: e.id });
        const notes = asList(r && r.reminders).map((n) => t(`revertReminder_${n.state}`, n.content, zoned(n.at, r.zone)))
          .concat(r && r.removed > 0 ? [t("revertRemoved", fmtNum(r.removed))] : []);
        notify([t("reverted"), ...notes].join(state.lang === "zh" ? "；" : "; "), "ok");
        load(false);
        state.groupsLoading = refreshGroups().catch(() => {}); // the counts the group list shows; browse waits for it
      } catch (err) {
        const why = refusal(err); // undone already (another tab, /memory revert): one sentence, and the row says so
        notify(why.code === "already_reverted" ? why.text : errorText(err), "error");
        if (why.code === "already_reverted") load(false);
      }
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
                el("td", {}, actorCell(a.actor, a.actor_name)),
                el("td", {}, AUDIT_KINDS[a.kind] ? t(AUDIT_KINDS[a.kind]) : a.kind),
                el("td", { class: "num" }, a.count), el("td", { class: "small" }, fmtTime(a.first_at)),
                el("td", { class: "small" }, fmtTime(a.last_at)), el("td", {}, a.last?.via ?? ""),
                el("td", { class: "small" }, a.last?.target ?? ""))))),
          r.dropped ? el("p", { class: "muted" }, t("refusedDropped", r.dropped)) : null]);
      } catch (e) { clear(refused).appendChild(el("p", { class: "error" }, errorText(e))); }
    };
    if (!groupsOfPlatform().length) { view.appendChild(el("p", { class: "muted", id: "history-nothing" }, t("historyNothing"))); return; }
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
    const exportNow = async (format = "json") => {
      const params = { platform: state.platform };
      if (format === "csv") Object.assign(params, { format: "csv", lang: state.lang }); // headers and values in the page's words
      staleError();
      if (what.value !== "all") params.group_id = group.value;
      if (what.value === "member") params.user_id = user.value.trim();
      if (decrypted.checked) params.decrypted = "1";
      const name = ["memories", state.platform, params.group_id, params.user_id].filter(Boolean).join("-") + `.${format}`;
      try { await bridge.download("export", params, name); } catch (e) { notify(errorText(e), "error"); }
    };

    const file = el("input", { type: "file", accept: ".json,.csv,.db,.sqlite,application/json,text/csv", id: "import-file" });
    // Files of design 000 (version 0) do not name their platform: this one is used for them.
    const importPlatform = el("input", { type: "text", id: "import-platform", value: state.platform || "lark", size: 10 });
    const out = el("div", { id: "import-out" });
    let parsed = null;
    // What no longer applies goes: another file's preview and its apply button, an old error.
    const stale = () => { parsed = null; clear(out); staleError(); };
    file.addEventListener("change", stale);
    // A JSON or CSV file goes as its text; a database file (LivingMemory's livingmemory.db) as base64. A file that
    // cannot be read throws its reason, in the page's words.
    const readFile = async () => {
      const f = file.files && file.files[0];
      if (!f) return null;
      let bytes;
      try { bytes = new Uint8Array(await f.arrayBuffer()); } catch { throw new Error(t("badRead")); }
      if (new TextDecoder().decode(bytes.subarray(0, 16)) === "SQLite format 3\u0000") {
        let binary = "";
        for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
        return { content: btoa(binary), encoding: "base64" };
      }
      const content = new TextDecoder().decode(bytes);
      if (!/\.csv$/i.test(f.name)) {
        try { JSON.parse(content); } catch { throw new Error(t("badFile")); }
      }
      return { content };
    };
    // A failed preview leaves only its reason: no earlier preview, nothing to apply.
    const preview = async () => {
      stale();
      try {
        const read = await readFile();
        if (!read) return;
        out.appendChild(el("p", { class: "muted" }, t("loading")));
        const r = await api.post("import/preview", { platform: importPlatform.value.trim(), ...read });
        parsed = read;
        clear(out);
        append(out, [importSummary(r), el("button", { type: "button", id: "import-apply", onclick: apply }, t("apply"))]);
      } catch (e) { stale(); out.appendChild(el("p", { class: "error" }, errorText(e))); }
    };
    const apply = async () => {
      if (!parsed) return;
      try {
        const r = await api.post("import/apply", { platform: importPlatform.value.trim(), ...parsed });
        clear(out);
        append(out, [el("p", { class: "ok" }, t("importApplied")), importSummary(r)]);
        await refreshGroups();
        drawChrome();
      } catch (e) { notify(errorText(e), "error"); }
    };
    append(view, [
      el("section", { class: "card" }, el("h2", {}, t("exportTitle")),
        el("div", { class: "filters" }, what, group, user, el("label", { class: "check" }, decrypted, t("exportDecrypted")),
          el("button", { type: "button", id: "export-btn", onclick: () => exportNow() }, t("download")),
          el("button", { type: "button", id: "export-csv", class: "ghost", onclick: () => exportNow("csv") }, t("downloadCsv"))),
        el("p", { class: "muted small" }, t("csvNote"))),
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
      // The target in words: the group by its name where known, else its id (not the session's platform:type: prefix)
      const reminders = asList(g.reminders).map((r) => t("importRemindTo",
        r.name || t("importRemindGroup", r.group_id ?? String(r.to ?? "").split(":").pop()), fmtNum(r.todos))).join(t("listSep"));
      const done = g.added !== undefined, passed = g.reminders_passed || {};
      const late = [["missed", done ? "importMissedDone" : "importMissed"], ["resumed", done ? "importResumedDone" : "importResumed"]]
        .filter(([k]) => passed[k] > 0).map(([k, words]) => el("div", { class: "muted" }, t(words, fmtNum(passed[k]))));
      const optedOut = asList(g.opted_out);
      return el("tr", { "data-group": g.group_id ?? "" },
        el("td", { class: "mono" }, g.group_id || t("globalDocument")),
        el("td", { class: "num" }, fmtNum(c.new ?? "")), el("td", { class: "num" }, fmtNum(c.duplicate ?? "")),
        el("td", { class: "num" }, fmtNum(c.conflicting ?? "")), el("td", { class: "num" }, fmtNum(c.invalid ?? "")),
        el("td", { class: "small reminders" }, reminders || (late.length ? "" : "—"), late),
        el("td", { class: "num", title: optedOut.join(", ") || null }, fmtNum(g.opted_out_count ?? 0)),
        el("td", { class: g.refused ? "error" : "num" }, g.refused ? g.refused : (g.added !== undefined ? fmtNum(g.added) : "")));
    });
    const table = el("table", { class: "table", id: "import-summary" },
      el("thead", {}, el("tr", {}, [t("group"), t("importNew"), t("importDuplicate"), t("importConflict"),
        t("importInvalid"), t("importReminders"), t("importOptedOut"), t("importAdded")].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows));
    if (r.source !== "livingmemory") return table;
    const tooLong = r.longest > r.content_limit
      && el("p", { class: "error", id: "import-too-long" }, t("importTooLong", fmtNum(r.longest), fmtNum(r.content_limit)));
    return el("div", {}, el("p", { class: "muted small" }, t("importFromLM")), tooLong, table, unmappedAccount(r.unmapped || {}));
  }

  // What another plugin's file holds that could not be mapped: a count per reason, with a few examples.
  function unmappedAccount(u) {
    const reasons = asList(u.reasons);
    const box = el("div", { id: "import-unmapped" }, el("h3", {}, t("unmappedTitle", fmtNum(u.count ?? 0))));
    if (!reasons.length) return box;
    box.appendChild(el("table", { class: "table" },
      el("thead", {}, el("tr", {}, [t("unmappedReason"), t("unmappedCount"), t("unmappedExamples")].map((h) => el("th", {}, h)))),
      el("tbody", {}, reasons.map((x) => el("tr", {},
        el("td", {}, x.reason), el("td", { class: "num" }, fmtNum(x.count)),
        el("td", { class: "small" }, asList(x.examples).map((e) => el("div", {},
          el("span", { class: "mono" }, `#${e.id} ${e.session || "—"}`), " ", e.content))))))));
    return box;
  }

  // ---------- Statistics ----------
  function renderStats(view) {
    const out = el("div", {});
    // The first request (every group) reads many groups: it can answer after the request for the group chosen since.
    const load = latestOnly(async (current) => {
      clear(out).appendChild(el("p", { class: "muted" }, t("loading")));
      try {
        const params = { platform: state.platform, group_id: group.value };
        state.statsGroup = group.value; // kept when the tab is drawn again (another language)
        const s = await api.get("stats", params);
        if (!current()) return;
        clear(out);
        const over = asList(s.over_time);
        const breakdown = s.breakdown || {};
        const topics = el("div", { id: "topics-box" });
        append(out, [
          topics,
          el("h3", {}, t("overTime")), over.length ? timeChart(over) : el("p", { class: "muted" }, t("empty")),
          el("div", { class: "grid3" },
            countCard(t("byType"), breakdown.type, "type"), countCard(t("byScope"), breakdown.scope, "scope"),
            countCard(t("bySource"), breakdown.source, "source")),
          el("h3", {}, t("calls")), callsTable(s.calls),
          el("h3", {}, t("mostInjected")), injectedTable(asList(s.most_injected)),
        ]);
        showTopics(topics, s.topics, params, current);
      } catch (e) { if (current()) clear(out).appendChild(el("p", { class: "error" }, errorText(e))); }
    });
    const group = groupSelect(true, load);
    if (state.statsGroup && [...group.options].some((o) => o.value === state.statsGroup)) group.value = state.statsGroup;
    append(view, [el("div", { class: "filters" }, el("label", {}, t("group"), group)), out]);
    load();
  }

  // ---------- What the group talks about and who shares what (issue 36) ----------
  // The `stats` answer's `topics` (one group): computed in the background, so the first answer may say `computing`;
  // then this part alone asks again every few seconds until the result is there (while the tab still shows it).
  const TOPICS_POLL_MS = 2000, TOPICS_POLLS = 90;
  // A count said in words: the `_one` form of the key when there is one and the count is 1 ("1 shared topic").
  const tn = (key, n, ...rest) => t(Number(n) === 1 && (STRINGS[state.lang] || STRINGS.zh)[`${key}_one`] !== undefined ? `${key}_one` : key, fmtNum(n), ...rest);
  // A member the platform never named (an imported group where nobody spoke yet) shows their id, as the browse
  // tab does (the page is for admins); cut short by the style, the whole id in the tooltip.
  const shortId = (id) => (id.length > 16 ? `${id.slice(0, 6)}…${id.slice(-6)}` : id); // ids differ at their ends
  const memberSpan = (m) => el("span", m.name ? {} : { class: "member-id", title: m.id || "" }, m.name || (m.id ? shortId(m.id) : t("unknownMember")));
  function showTopics(box, d, params, current, polls = 0) {
    clear(box);
    if (!params.group_id) { box.appendChild(el("p", { class: "muted", id: "topics-pick" }, t("topicsPickGroup"))); return; }
    if (!d) return;
    if (!d.computed) {
      box.appendChild(el("section", { class: "card", id: "topics" }, el("h3", {}, t("topics")),
        el("p", { class: "muted topics-computing" }, d.computing ? t("topicsComputing") : t("topicsFailed"))));
      if (d.computing && polls < TOPICS_POLLS) {
        setTimeout(async () => {
          if (!current() || !box.isConnected) return;
          try {
            const s = await api.get("stats", params);
            if (current() && box.isConnected) showTopics(box, s.topics, params, current, polls + 1);
          } catch (e) { if (current() && box.isConnected) clear(box).appendChild(el("p", { class: "error" }, errorText(e))); }
        }, TOPICS_POLL_MS);
      }
      return;
    }
    const items = d.items || {};
    const names = (who) => (who && (who.name || who.id)) || t("unknownMember");
    const list = (title, ids, more) => {
      const target = el("div", {}, el("h4", {}, title), ids.length ? el("ul", { class: "topic-items" }, ids.filter((i) => items[i]).map((i) => {
        const m = items[i];
        const whose = m.kind === "member" ? (m.owner_name || m.owner || t("unknownMember")) : m.kind === "episode" ? t("kind_episode") : t("kind_group");
        return el("li", { "data-id": i }, el("span", { class: "content" }, m.content), " ",
          el("span", { class: "muted small" }, `${whose} · ${fmtTime(m.created_at)}`));
      })) : el("p", { class: "muted" }, t("noneListed")), more > 0 && el("p", { class: "muted small" }, t("topicMore", more)));
      return target;
    };
    const shown = asList(d.topics);
    const real = shown.filter((x) => x.id !== "other");
    const topicName = (x) => (x.id === "other" ? t("topicOther") : x.label || t("topicN", real.indexOf(x) + 1));
    const picked = el("div", { id: "topic-memories" });
    const head = [el("h3", {}, t("topics")),
      el("p", { class: "muted small" }, t("topicsNote", fmtTime(d.computed_at), tn("nMemories", d.memories), tn("nEpisodes", d.episodes), d.zone || ""),
        d.archived ? ` ${tn("topicsArchived", d.archived)}` : "", d.excluded_members ? ` ${tn("topicsExcluded", d.excluded_members)}` : ""),
      !d.fresh && d.computing && el("p", { class: "muted small topics-stale" }, t("topicsStale", fmtTime(d.computed_at)))];
    const section = el("section", { class: "card", id: "topics" }, head);
    if (!real.length) section.appendChild(el("p", { class: "muted topics-none" }, t("topicsNone", tn("nMemories", d.memories), tn("nEpisodes", d.episodes), d.min_topic_size || 3)));
    if (shown.length) {
      section.appendChild(weekLegend());
      section.appendChild(el("ul", { class: "topic-list" }, shown.map((x) => el("li", { class: "topic", "data-topic": x.id },
        el("div", { class: "topic-head" },
          el("button", { type: "button", class: "ghost topic-open", onclick: () => clear(picked).appendChild(list(topicName(x), asList(x.memory_ids), x.more)) }, topicName(x)),
          el("span", { class: "topic-size muted" }, tn("topicSize", x.size), x.archived ? ` · ${t("topicArchived", fmtNum(x.archived))}` : ""),
          el("span", { class: "topic-members" }, asList(x.members).flatMap((m, i) => (i ? [t("listSep"), memberSpan(m)] : [memberSpan(m)])),
            x.member_count > asList(x.members).length ? t("topicMoreMembers", x.member_count) : "")),
        topicTerms(x),
        weekStrip(asList(x.timeline), d.zone)))));
      section.appendChild(picked);
    }
    box.appendChild(section);
    box.appendChild(memberGraph(d.graph || {}, items, list, names));
    if (d.labelling) pollNames(box, params, current, polls);
  }

  // A name the extraction model wrote for a topic shows the terms it rests on under it (small, muted).
  function topicTerms(x) {
    const terms = asList(x.terms);
    return el("div", { class: "topic-terms muted small", title: t("topicNamedBy"), hidden: !(x.named_by_model && terms.length) }, terms.join(" · "));
  }

  // While the model names the topics (`labelling`), ask again and put the names in place (what is open stays open).
  function pollNames(box, params, current, polls) {
    if (polls >= TOPICS_POLLS) return;
    setTimeout(async () => {
      if (!current() || !box.isConnected) return;
      let s;
      try { s = (await api.get("stats", params)).topics; } catch (e) { return; }
      if (!current() || !box.isConnected || !s || !s.computed) return;
      for (const x of asList(s.topics)) {
        const li = [...box.querySelectorAll("li.topic")].find((n) => n.dataset.topic === x.id);
        if (!li) continue;
        if (x.named_by_model) li.querySelector("button.topic-open").textContent = x.label;
        li.querySelector(".topic-terms").replaceWith(topicTerms(x));
      }
      if (s.labelling) pollNames(box, params, current, polls + 1);
    }, TOPICS_POLL_MS);
  }

  function weekLegend() {
    const key = (k) => `week${k[0].toUpperCase()}${k.slice(1)}`;
    return el("div", { class: "week-legend small muted" }, ["new", "used", "faded"].map((k) =>
      el("span", { title: t(`tip_${key(k)}`) }, el("i", { class: `swatch ${k}` }), t(key(k)), k === "used" ? t("legendUsed") : "")),
      el("span", { class: "week-tap" }, t("weekTap")));
  }

  // A topic's weeks as a tiny bar strip: per week three thin bars, new, last used, faded (the week in the title);
  // a tap or click on a week says its numbers in the caption under the strip (phones have no hover), and one line
  // under it adds the weeks up.
  function weekStrip(weeks, zone) {
    const NS = "http://www.w3.org/2000/svg";
    const bar = 4, week = 3 * bar + 4, h = 30;
    const max = Math.max(1, ...weeks.flatMap((w) => [w.new || 0, w.used || 0, w.faded || 0]));
    const caption = el("div", { class: "week-caption small", "aria-live": "polite" });
    const sum = (k) => weeks.reduce((n, w) => n + (Number(w[k]) || 0), 0);
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("class", "topic-weeks");
    svg.setAttribute("viewBox", `0 0 ${Math.max(1, weeks.length * week)} ${h}`);
    svg.setAttribute("width", String(Math.max(1, weeks.length * week)));
    svg.setAttribute("height", String(h));
    weeks.forEach((w, i) => {
      const g = document.createElementNS(NS, "g");
      g.setAttribute("class", "week");
      g.setAttribute("tabindex", "0");
      const hit = document.createElementNS(NS, "rect"); // the whole week's column answers a tap, not only its bars
      for (const [a, b] of Object.entries({ x: i * week, y: 0, width: week, height: h, class: "week-hit" })) hit.setAttribute(a, String(b));
      g.appendChild(hit);
      const title = document.createElementNS(NS, "title");
      title.textContent = t("weekTitle", w.week, zoned(w.start, zone).slice(0, 10), w.new || 0, w.used || 0, w.faded || 0);
      g.appendChild(title);
      ["new", "used", "faded"].forEach((k, j) => {
        const v = Number(w[k] || 0);
        const r = document.createElementNS(NS, "rect");
        const bh = v ? Math.max(2, ((h - 2) * v) / max) : 1;
        for (const [a, b] of Object.entries({ x: i * week + j * bar, y: h - bh, width: bar - 0.5, height: bh })) r.setAttribute(a, String(b));
        r.setAttribute("class", v ? k : `${k} zero`);
        g.appendChild(r);
      });
      const say = () => {
        svg.querySelectorAll("g.week.picked").forEach((x) => x.classList.remove("picked"));
        g.classList.add("picked");
        const from = zoned(w.start, zone), to = zoned(w.start + 6 * 86400, zone);
        caption.textContent = t("weekCaption", Number(String(w.week).split("W").pop()) || i + 1, from.slice(5, 10).replace("-", "/"),
          to.slice(5, 10).replace("-", "/"), w.new || 0, w.used || 0, w.faded || 0);
      };
      g.addEventListener("click", say);
      g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") say(); });
      svg.appendChild(g);
    });
    // the first and the last week under the strip (ISO weeks, Monday to Sunday, in the plugin's zone)
    const span = weeks.length ? `${zoned(weeks[0].start, zone).slice(5, 10)} – ${zoned(weeks[weeks.length - 1].start, zone).slice(5, 10)}` : "";
    return el("div", { class: "topic-weeks-wrap" }, el("div", { class: "topic-weeks-box" }, svg, el("span", { class: "muted small topic-span" }, span)),
      el("div", { class: "week-totals muted small" }, t("weekTotals", sum("new"), sum("used"), sum("faded"))), caption);
  }

  // The member graph: members on a circle (a fixed order: the server's, most active first, so the same data is
  // drawn the same way), one line per pair that shares something, thicker the more; names under the dots.
  function memberGraph(graph, items, list, names) {
    const NS = "http://www.w3.org/2000/svg";
    const nodes = asList(graph.nodes), edges = asList(graph.edges);
    const card = el("section", { class: "card", id: "graph-card" }, el("h3", {}, t("graphTitle")));
    const picked = el("div", { id: "graph-memories" });
    if (!nodes.length || !edges.length) card.appendChild(el("p", { class: "muted graph-empty" }, t("graphEmpty")));
    if (!nodes.length) return card;
    if (edges.length) card.appendChild(el("p", { class: "muted small" }, t("graphNote")));
    const w = 360, h = nodes.length > 8 ? 360 : 300, cx = w / 2, cy = h / 2 - 8;
    const radius = nodes.length === 1 ? 0 : Math.min(cx, cy) - 44;
    const font = nodes.length > 16 ? 10 : 13;
    const most = Math.max(1, ...nodes.map((n) => n.memories || 0));
    const heaviest = Math.max(1e-9, ...edges.map((e) => e.weight || 0));
    const at = new Map(nodes.map((n, i) => {
      const angle = -Math.PI / 2 + (2 * Math.PI * i) / nodes.length;
      return [n.id, { x: cx + radius * Math.cos(angle), y: cy + radius * Math.sin(angle), node: n }];
    }));
    const svg = document.createElementNS(NS, "svg");
    const make = (tag, attrs, parent, text) => {
      const n = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
      if (text !== undefined) n.textContent = text;
      parent.appendChild(n);
      return n;
    };
    svg.setAttribute("id", "member-graph");
    svg.setAttribute("class", "graph");
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", t("graphTitle"));
    const short = (name) => (name.length > 8 ? `${name.slice(0, 7)}…` : name);
    const select = (g, title, ids) => {
      svg.querySelectorAll(".picked").forEach((x) => x.classList.remove("picked"));
      g.classList.add("picked");
      clear(picked).appendChild(list(title, ids, 0));
    };
    for (const e of edges) {
      const a = at.get(e.a), b = at.get(e.b);
      if (!a || !b) continue;
      const an = names({ id: e.a, name: e.a_name }), bn = names({ id: e.b, name: e.b_name });
      const g = make("g", { class: "edge", "data-a": e.a, "data-b": e.b, tabindex: 0 }, svg);
      const why = t("edgeWhy", tn("nTopics", Number(e.topics) || 0), e.mentions || 0, tn("nTogether", Number(e.episodes) || 0))
        + (asList(e.entities).length ? `; ${t("edgeNames", asList(e.entities).join(t("listSep")))}` : "");
      make("title", {}, g, `${t("edgeMemories", an, bn)}: ${why}`);
      make("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "hit" }, g);
      make("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "line", "stroke-width": (1.5 + (6 * (e.weight || 0)) / heaviest).toFixed(1) }, g);
      const open = () => { select(g, t("edgeMemories", an, bn), asList(e.memory_ids)); picked.appendChild(el("p", { class: "muted small" }, why)); };
      g.addEventListener("click", open);
      g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") open(); });
    }
    for (const { x, y, node } of at.values()) {
      const name = names(node);
      const g = make("g", { class: "node", "data-member": node.id, tabindex: 0 }, svg);
      make("title", {}, g, t("nodeTitle", name, tn("nMemories", node.memories || 0), tn("nConversations", node.episodes || 0)));
      const r = 7 + 9 * Math.sqrt((node.memories || 0) / most);
      make("circle", { cx: x, cy: y, r: r.toFixed(1) }, g);
      const above = y < cy - 1; // names outside the circle: above the dots of its upper half, under the others
      const shown = node.name || !node.id ? short(name) : name.length > 7 ? `…${name.slice(-6)}` : name; // an id: its end
      make("text", { x, y: above ? y - r - 5 : y + r + font + 2, "text-anchor": "middle", "font-size": font }, g, shown);
      const open = () => select(g, t("nodeMemories", name), asList(node.memory_ids));
      g.addEventListener("click", open);
      g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") open(); });
    }
    card.appendChild(svg);
    card.appendChild(picked);
    return card;
  }

  function injectedTable(items) {
    if (!items.length) return el("p", { class: "muted" }, t("empty"));
    return el("table", { class: "table" },
      el("thead", {}, el("tr", {}, [t("times"), t("content"), t("type"), t("scope"), t("group")].map((h) => el("th", {}, h)))),
      el("tbody", {}, items.map((i) => el("tr", {}, el("td", { class: "num" }, fmtNum(i.count)),
        el("td", { class: "content" }, i.content ?? ""), el("td", {}, label("type", i.type)),
        el("td", {}, label("scope", i.scope)), el("td", {}, groupCell(state.platform, i.group_id))))));
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
      el("tbody", {}, rows.map(([actor, v]) => el("tr", {}, el("td", {}, actorCell(actor)), el("td", { class: "num" }, fmtNum(v.calls ?? 0)),
        el("td", { class: "num" }, fmtNum(v.input_tokens ?? 0)), el("td", { class: "num" }, fmtNum(v.output_tokens ?? 0))))));
  }

  // ---------- Todos of a group (issue 20 item 5) ----------
  // Times are shown and typed in the plugin's zone (the server reads a new reminder time in it).
  function zoned(v, zone) {
    if (v === undefined || v === null) return "";
    try {
      return stamp(new Date(v * 1000), zone || undefined);
    } catch { return fmtTime(v); }
  }

  // "2026-11-23T10:00" in the zone, for <input type="datetime-local">.
  function zonedInput(v, zone) {
    if (v === undefined || v === null) return "";
    try {
      const parts = Object.fromEntries(new Intl.DateTimeFormat("en-CA", { timeZone: zone || undefined, hourCycle: "h23",
        year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit" })
        .formatToParts(new Date(v * 1000)).map((p) => [p.type, p.value]));
      return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}`;
    } catch { return ""; }
  }

  const DAY_CODES = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
  function recurrenceText(rule) {
    if (!rule) return "";
    if (rule === "daily") return t("rec_daily");
    if (rule === "weekdays") return t("rec_weekdays");
    const [kind, arg] = rule.split(":");
    if (kind === "weekly") return t("rec_weekly", arg.split(",").map((d) => t(`day_${d}`)).join(t("listSep")));
    if (kind === "monthly") return t("rec_monthly", arg);
    return rule;
  }

  function todoStatusText(todo) {
    if (todo.status === "pending" && !todo.confirmed) return t("todo_unconfirmed");
    return t(`todo_${todo.status}`);
  }

  function deliveryText(todo, zone) {
    const d = todo.delivery;
    if (d && d.state) {
      const when = d.state === "sent" || d.state === "late" ? zoned(d.sent_at ?? d.occurrence, zone) : zoned(d.occurrence, zone);
      let s = t(`delivery_${d.state}`, when);
      if (d.state === "retrying" && d.next_attempt_at) s += ` · ${t("deliveryRetryAt", zoned(d.next_attempt_at, zone))}`;
      return s;
    }
    if (todo.next_reminder) return t("deliveryWaiting", zoned(todo.next_reminder, zone));
    if (todo.status === "pending" && todo.remind_at && !todo.confirmed) return t("deliveryUnconfirmed");
    return t("deliveryNone");
  }

  function personName(name, id) {
    return name && name !== id ? name : (id || "");
  }

  function todoPanel(base) {
    const root = el("div", { class: "todo-panel", id: "todo-panel" });
    let zone = "";
    const showClosed = el("input", { type: "checkbox", id: "todo-show-closed", onchange: () => load() });
    async function load() {
      clear(root).appendChild(el("p", { class: "muted" }, t("loading")));
      let r;
      try { r = await api.get("todos", base); } catch (e) { clear(root).appendChild(el("p", { class: "error" }, errorText(e))); return; }
      zone = r.zone || "";
      const all = asList(r, "items");
      const items = showClosed.checked ? all : all.filter((x) => x.status === "pending");
      const closed = all.length - all.filter((x) => x.status === "pending").length;
      clear(root);
      append(root, [
        el("div", { class: "toolbar" }, el("label", { class: "check" }, showClosed, t("todoShowClosed", closed))),
        items.length ? el("table", { class: "table", id: "todos-table" },
          el("thead", {}, el("tr", {}, [t("content"), t("todoWho"), t("todoRemind"), t("todoDue"), t("todoStatus"),
            t("todoDelivery"), t("actions")].map((h) => el("th", {}, h)))),
          el("tbody", {}, items.map((x) => el("tr", { "data-todo": x.id, "data-status": x.status },
            el("td", { class: "content" }, x.content),
            el("td", { title: x.is_group ? t("todoCreatedBy", personName(x.creator_name, x.creator)) : x.assignee },
              x.is_group ? t("todoWholeGroup") : personName(x.assignee_name, x.assignee),
              !x.is_group && x.creator !== x.assignee &&
                el("div", { class: "muted small todo-set-by" }, t("todoSetBy", personName(x.creator_name, x.creator)))),
            el("td", { class: "small" }, x.remind_at ? zoned(x.remind_at, zone) : "—",
              x.recurrence && el("div", { class: "muted" }, recurrenceText(x.recurrence))),
            el("td", { class: "small" }, x.due_at ? zoned(x.due_at, zone) : "—"),
            el("td", {}, todoStatusText(x)),
            el("td", { class: "small" }, deliveryText(x, zone),
              x.delivery && x.delivery.last_error && el("div", { class: "muted" }, x.delivery.last_error)),
            el("td", { class: "row-actions" }, x.changeable ? [
              el("button", { type: "button", class: "ghost", "data-action": "done", onclick: () => change(x, { status: "done" }, t("todoDoneOk")) }, t("todoMarkDone")),
              el("button", { type: "button", class: "ghost", "data-action": "edit", onclick: () => editTodo(x) }, t("edit")),
              el("button", { type: "button", class: "ghost danger-text", "data-action": "cancel", onclick: () => cancelTodo(x) }, t("todoCancel")),
            ] : el("span", { class: "muted small" }, x.completed_at ? zoned(x.completed_at, zone) : "")))))) :
          el("p", { class: "muted" }, t("todoNone")),
        el("p", { class: "muted small" }, t("todoNote")),
      ]);
    }
    async function change(x, body, ok) {
      try {
        await api.post("todo/update", { ...base, todo_id: x.id, ...body });
        notify(ok);
        await load();
        return true;
      } catch (e) { notify(errorText(e), "error"); return false; }
    }
    async function cancelTodo(x) {
      if (!(await confirmDialog(t("todoConfirmCancel", x.content)))) return;
      await change(x, { status: "cancelled" }, t("todoCancelledOk"));
    }
    // As the memory dialog (issue 35 item 3): open until the server takes the edit or the person cancels, with
    // what was typed; a refusal is said beside the field it concerns (the server names it), in the page's words.
    async function editTodo(x) {
      const content = el("textarea", { rows: 3, class: "wide", name: "content" });
      content.value = x.content;
      const remind = el("input", { type: "datetime-local", name: "remind_at", value: zonedInput(x.remind_at, zone), disabled: !x.can_remind });
      const fieldError = (field) => el("p", { class: "error field-error", "data-field": field, role: "alert", hidden: true });
      const errors = { content: fieldError("content"), remind_at: fieldError("remind_at"), "": fieldError("") };
      const body = el("div", { class: "form" },
        el("label", {}, t("content"), content), errors.content,
        el("label", {}, t("todoRemind"), remind, el("span", { class: "muted small" },
          x.can_remind ? [t("todoZone", zone), x.recurrence ? ` · ${t("todoRecurHint", recurrenceText(x.recurrence))}` : ""] : t("todoNoRemind"))),
        errors.remind_at, errors[""]);
      const say = (field, text) => {
        for (const [name, box] of Object.entries(errors)) {
          box.textContent = name === (field in errors ? field : "") ? text : "";
          box.hidden = !box.textContent;
        }
      };
      for (;;) {
        const answer = await dialog(t("todoEditTitle"), body, [
          { value: "cancel", label: t("cancel"), class: "ghost" }, { value: "save", label: t("save") }]);
        if (answer !== "save") return;
        say("", "");
        if (!content.value.trim()) { say("content", t("err_content_empty")); continue; }
        const wanted = {};
        if (content.value.trim() !== x.content) wanted.content = content.value;
        if (remind.value && remind.value !== zonedInput(x.remind_at, zone)) wanted.remind_at = remind.value;
        if (!Object.keys(wanted).length) return;
        try {
          await api.post("todo/update", { ...base, todo_id: x.id, ...wanted });
        } catch (e) {
          const r = refusal(e);
          if (r.code === "todo_gone" || r.code === "todo_closed") { notify(r.text, "error"); await load(); return; }
          say(r.params.field || "", r.code ? r.text : errorText(e));
          continue;
        }
        notify(t("saved"));
        await load();
        return;
      }
    }
    load();
    return root;
  }

  // ---------- Several memories at once (issue 20 item 8) ----------
  // items: the selected memories; ref(m): the request's {platform, group_id, scope, owner, id}; members: the group's.
  async function bulkEdit(items, ref, members, reload) {
    if (!items.length) return;
    const keep = (name) => option("", t("bulkKeep"), true);
    const type = el("select", { name: "type" }, keep(), TYPES.map((v) => option(v, label("type", v))));
    const importance = el("input", { type: "number", name: "importance", min: 0, max: 1, step: 0.05, placeholder: t("bulkKeep") });
    const scope = el("select", { name: "scope" }, keep(), option("group", label("scope", "group")), option("member", label("scope", "member")));
    const member = el("select", { name: "member", hidden: true }, (members || []).map((u) => option(u.id, u.name ? `${u.name} (${u.id})` : u.id)));
    scope.addEventListener("change", () => { member.hidden = scope.value !== "member"; });
    const error = el("p", { class: "error", hidden: true });
    const body = el("div", { class: "form" }, el("p", { class: "muted" }, t("bulkIntro", items.length)),
      el("label", {}, t("type"), type),
      el("label", {}, t("importance"), importance, el("span", { class: "muted small" }, t("importanceHint"))),
      el("label", {}, t("scope"), scope, member), error);
    const answer = await dialog(t("bulkTitle", items.length), body, [
      { value: "cancel", label: t("cancel"), class: "ghost" }, { value: "save", label: t("save") }]);
    if (answer !== "save") return;
    const change = {};
    if (type.value) change.type = type.value;
    if (importance.value !== "") change.importance = Number(importance.value);
    if (scope.value) change.scope = scope.value;
    if (scope.value === "member") change.member = member.value;
    if (!Object.keys(change).length) return;
    if (scope.value === "group" && !(await confirmDialog(t("bulkToGroup", items.length)))) return;
    const byDocument = new Map();
    for (const m of items) {
      const r = ref(m);
      const k = `${r.platform}|${r.group_id}|${r.scope === "global" ? "global" : ""}`;
      if (!byDocument.has(k)) byDocument.set(k, { platform: r.platform, group_id: r.group_id, items: [] });
      byDocument.get(k).items.push({ scope: r.scope, owner: r.owner, id: r.id });
    }
    let changed = 0;
    const leftOut = [];  // moves past a cap: the server moved the others and says why of each one it left
    try {
      for (const req of byDocument.values()) {
        const r = await api.post("memory/bulk", { ...req, ...change, confirm: scope.value === "group" });
        changed += Array.isArray(r && r.changed) ? r.changed.length : 0;
        if (Array.isArray(r && r.left_out)) leftOut.push(...r.left_out);
      }
      if (!leftOut.length) notify(t("bulkDone", changed));
      else {
        const content = (id) => {
          const text = (items.find((x) => ref(x).id === id) || {}).content || id;
          return text.length > 24 ? `${text.slice(0, 24)}…` : text;
        };
        const why = leftOut.slice(0, 3).map((x) => `「${content(x.id)}」${x.reason}`).join(t("listSep"));
        notify(t("bulkLeftOut", changed, leftOut.length, why + (leftOut.length > 3 ? "…" : "")), "error");
      }
    } catch (e) { notify(errorText(e), "error"); }
    await reload();
  }

  // ---------- Memories over time: an SVG chart with a title, axes and tick labels ----------
  function timeChart(days) {
    const NS = "http://www.w3.org/2000/svg";
    const w = 640, h = 240, left = 48, right = 12, top = 30, bottom = 42;
    const values = days.map((d) => Number(d.memories ?? 0));
    // The y-axis counts in whole steps of 1, 2 or 5 (×10ⁿ), at most four of them, up to the highest count or above it
    // (5 memories: 0, 2, 4, 6; it said 0, 1, 3, 4, 5, rounding quarters of the highest count).
    const highest = Math.max(1, ...values);
    let step = 1;
    while (step * 4 < highest) step *= String(step).startsWith("2") ? 2.5 : 2; // 1, 2, 5, 10, 20, 50, …
    const ticks = Math.ceil(highest / step);
    const max = ticks * step;
    const plotW = w - left - right, plotH = h - top - bottom;
    const bw = plotW / values.length;
    const svg = document.createElementNS(NS, "svg");
    const node = (tag, attrs, textContent) => {
      const n = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
      if (textContent !== undefined) n.textContent = textContent;
      svg.appendChild(n);
      return n;
    };
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    svg.setAttribute("class", "chart");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", t("overTime"));
    svg.setAttribute("id", "over-time-chart");
    node("text", { x: w / 2, y: 16, "text-anchor": "middle", class: "chart-title" }, t("chartTitle"));
    for (let i = 0; i <= ticks; i += 1) {
      const v = i * step;
      const y = top + plotH - (plotH * v) / max;
      node("line", { x1: left, x2: w - right, y1: y, y2: y, class: i ? "grid" : "axis" });
      node("text", { x: left - 6, y: y + 4, "text-anchor": "end", class: "tick y-tick" }, String(v));
    }
    node("line", { x1: left, x2: left, y1: top, y2: top + plotH, class: "axis" });
    values.forEach((v, i) => {
      const bh = (plotH * v) / max;
      const barW = Math.max(1, Math.min(bw - 2, 36));
      const r = node("rect", { x: left + i * bw + (bw - barW) / 2, y: top + plotH - bh, width: barW, height: bh });
      const title = document.createElementNS(NS, "title");
      title.textContent = `${days[i].day ?? ""}: ${v}`;
      r.appendChild(title);
    });
    const labels = Math.min(values.length, 6);
    const shown = new Set(Array.from({ length: labels }, (_, k) => Math.round((k * (values.length - 1)) / Math.max(1, labels - 1))));
    shown.forEach((i) => node("text", { x: left + i * bw + bw / 2, y: top + plotH + 16, "text-anchor": "middle", class: "tick x-tick" },
      String(days[i].day ?? "").slice(5)));
    node("text", { x: left + plotW / 2, y: h - 6, "text-anchor": "middle", class: "axis-title" }, t("chartX"));
    node("text", { x: 12, y: top + plotH / 2, "text-anchor": "middle", class: "axis-title",
      transform: `rotate(-90 12 ${top + plotH / 2})` }, t("chartY"));
    const caption = el("div", { class: "muted small chart-caption" }, t("chartCaption", days[0].day ?? "", days[days.length - 1].day ?? "",
      values[values.length - 1], Math.max(...values)));
    return el("div", { class: "chart-box" }, svg, caption);
  }

  // ---------- Delete everything about one person ----------
  // The admin types a user id or the name the page shows; the server first says whom that is (or refuses an unknown
  // or ambiguous name with the candidates, shown here), the admin confirms with that id or that name, and the
  // erasure is sent for the resolved id, so it erases the person who was confirmed.
  function renderPrivacy(view) {
    const user = el("input", { type: "text", name: "user_id", placeholder: t("userId"), class: "grow" });
    const out = el("div", { id: "privacy-result" });
    const run = async (ev) => {
      ev.preventDefault();
      const typed = user.value.trim();
      if (!typed) return;
      clear(out);
      let who;
      try {
        who = await api.post("person/erase", { platform: state.platform, user_id: typed });
      } catch (e) { out.appendChild(el("p", { class: "error" }, refusal(e).text)); return; }
      const label = who.name ? t("nameAndId", who.name, who.user_id) : who.user_id;
      const where = Object.entries(who.groups || {}).map(([g, n]) => t("eraseCount", keyName(g), n)).join(t("listSep"));
      const ask = who.name ? t("typeToConfirm", who.user_id, who.name) : t("typeIdToConfirm", who.user_id);
      const accepted = who.name ? [who.user_id, who.name] : [who.user_id];
      const message = [t("eraseWho", label), where ? t("eraseWhere", where) : "", t("privacyText"), ask].filter(Boolean);
      if (!(await confirmDialog(message.join("\n\n"), { danger: true, requireText: accepted }))) return;
      try {
        const r = await api.post("person/erase", { platform: state.platform, user_id: who.user_id, confirm: true });
        const done = r && r.complete !== false;
        clear(out).appendChild(el("p", { class: done ? "ok" : "error" }, t(done ? "erased" : "erasedPartly", label)));
        if (r && typeof r === "object") out.appendChild(erasureSummary(r)); // before the groups it emptied go
        await refreshGroups();
      } catch (e) { clear(out).appendChild(el("p", { class: "error" }, refusal(e).text)); }
    };
    if (!groupsOfPlatform().length) { // nothing stored yet: no form that could only be refused
      append(view, [el("h2", {}, t("privacyTitle")), el("p", { class: "muted", id: "privacy-nothing" }, t("privacyNothing"))]);
      return;
    }
    append(view, [el("h2", {}, t("privacyTitle")), el("p", { class: "note" }, t("privacyText")),
      el("p", { class: "muted small" }, t("privacyLimits")),
      el("form", { class: "filters", id: "privacy-form", onsubmit: run }, el("span", {}, state.platform), user,
        el("button", { type: "submit", class: "danger" }, t("erase"))), out]);
  }

  // A group named by its key ("lark:oc_x", as the erasure answers): by its name where known, else its id.
  function keyName(key) {
    const i = key.indexOf(":");
    const platform = key.slice(0, i), id = key.slice(i + 1);
    return id === "(global)" ? t("globalDocument") : (groupOf(platform, id)?.name || id);
  }

  // What an erasure did, in words: how many memories and todos went in each group (by the group's name), the episodes
  // it took the person out of, the group memories kept as a former member's, the messages heard, what failed.
  function erasureSummary(r) {
    const where = keyName;
    const counted = (counts) => Object.entries(counts || {}).filter(([, n]) => n > 0);
    const total = (counts) => counted(counts).reduce((sum, [, n]) => sum + n, 0);
    const perGroup = (counts) => counted(counts).map(([k, n]) => t("erasePerGroup", where(k), fmtNum(n))).join(state.lang === "zh" ? "；" : "; ");
    const line = (key, counts, always = false) => (always || total(counts)) &&
      el("li", {}, t(key, fmtNum(total(counts))), total(counts) ? (state.lang === "zh" ? `（${perGroup(counts)}）` : ` (${perGroup(counts)})`) : "");
    const failed = Object.entries(r.failed || {}).map(([k, why]) => `${where(k)}：${why}`).join("；");
    return el("ul", { id: "erase-summary" }, [
      line("eraseMemories", r.memories, true), line("eraseTodos", r.todos), line("eraseEpisodes", r.episodes),
      line("eraseReattributed", r.reattributed), r.heard && el("li", {}, t("eraseHeard")),
      failed && el("li", { class: "error" }, t("eraseFailed", failed)),
    ].filter(Boolean));
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
    document.querySelectorAll("[data-t]").forEach((n) => { n.textContent = t(n.dataset.t); });
    const secrets = clear(document.getElementById("secrets"));
    state.configSecrets.forEach((s) => secrets.appendChild(el("p", { "data-setting": s.setting },
      t(s.shadowed ? "secretShadowed" : "secretInConfig", s.setting, s.variable))));
    secrets.hidden = state.configSecrets.length === 0;
    drawSettingWarnings();
    const zone = document.getElementById("zone-label");
    zone.textContent = state.zone ? t("zoneLabel", state.zone.name, state.zone.offset) : "";
    zone.hidden = !state.zone;
    const tabs = clear(document.getElementById("tabs"));
    Object.keys(TABS).forEach((name) => tabs.appendChild(el("button", { type: "button", role: "tab", "data-tab": name,
      "aria-selected": String(state.tab === name), class: state.tab === name ? "tab active" : "tab",
      onclick: () => { if (name === "browse") state.openGroup = null; show(name); } }, t(`tab_${name}`))));
    const platforms = knownPlatforms();
    if (state.platform && !platforms.includes(state.platform)) platforms.unshift(state.platform);
    const sel = clear(document.getElementById("platform"));
    platforms.forEach((p) => sel.appendChild(option(p, p, p === state.platform)));
    if (!platforms.length) sel.appendChild(option("", t("noPlatformYet"), true)); // a fresh instance: not blank
    sel.disabled = platforms.length < 2;
  }

  async function show(tab) {
    state.tab = tab;
    clearNotice();
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
    // The page speaks the dashboard's language: the first context's, then every change the dashboard sends
    // (its language switch re-sends the context). Chinese for zh-*, English for every other locale.
    const ctx = await bridge.ready();
    state.lang = langOf((ctx && ctx.locale) || bridge.getLocale());
    let started = false;
    if (typeof bridge.onContext === "function") {
      bridge.onContext((next) => {
        const lang = langOf(next && next.locale);
        if (lang === state.lang) return;
        state.lang = lang;
        if (started) show(state.tab); else drawChrome();
      });
    }
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
    started = true;
    markReady();
  }

  function langOf(locale) { return String(locale || "zh-CN").toLowerCase().startsWith("zh") ? "zh" : "en"; }

  // For the end-to-end test and the benchmark: the moment the first view is on screen.
  function markReady() {
    document.body.dataset.ready = "1";
    window.__memoryManagerReadyAt = performance.now();
  }

  start();
})();

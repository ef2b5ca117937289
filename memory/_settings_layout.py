"""How the settings appear on AstrBot's plugin config page: sections in the order an operator reaches for them, and
for each setting a plain Chinese label and hint. `_conf_schema.json` is written from here (`conf_schema()`; run
`python scripts/write_conf_schema.py`) and a test keeps the two equal.

The schema nests each setting under its section (`SECTIONS` in `_settings`). AstrBot deletes every config key its
schema does not name (`AstrBotConfig.check_config_integrity`, before the plugin is built), so the schema also keeps
every setting's flat top-level key, hidden (`invisible`): an install from before the sections keeps its values
there until the plugin moves them into their sections (`Settings.from_mapping` reads them, the adapter writes the
effective layout back and resets them to their defaults), and a script that writes the old keys still works.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ._settings import _CHOICES, _RANGES, SECTIONS, Settings, SettingWarning


@dataclass(frozen=True)
class Item:
    label: str
    hint: str
    labels: tuple[str, ...] = ()  # one per choice of a select, in `_CHOICES` order
    slider_step: float = 0.0  # a fractional setting's slider step (whole numbers step by 1)
    provider: bool = False  # AstrBot's chat-provider selector
    secret: bool = False  # shown masked, with its hint in bold


TITLES: dict[str, tuple[str, str]] = {
    "basic": ("基本设置", "大多数人只需要看这一组：开关、每人能记多少、每次回复带上多少记忆、时区。"),
    "group_memory": ("群公共记忆与权限", "谁能添加对全群生效的记忆，以及是否允许跨群通用的记忆。"),
    "attachments": (
        "图片与文件",
        "成员发图片或文件并让机器人记住时（如“记住这张图：这是部署架构”），连同记忆一起保存；之后发同一张图能找回相关记忆。",
    ),
    "recall": (
        "召回：回复时带上哪些记忆",
        "按词语匹配，并按意思匹配：默认用插件自带的多语言模型，配置了 AstrBot 的向量模型时改用它。",
    ),
    "extraction": (
        "自动记忆：从群聊中提取",
        "默认关闭。开启后插件阅读群里的全部消息，定期调用模型自动记下值得记住的事，会产生模型费用。",
    ),
    "todos": ("待办与提醒", "成员可以让机器人记下待办，到点在群里提醒。"),
    "episodes": (
        "情境记忆：记得聊过什么",
        "需要开启「自动记忆」。把群聊按段落概括下来，成员问“上次聊了什么”时能答上来。",
    ),
    "aging": (
        "记忆随时间变化",
        "只影响自动提取的记忆：长期不用的逐渐淡出并归档，常被用到的变得更重要。一般不需要改。",
    ),
    "storage": ("存储", "记忆保存在哪里。单机使用保持默认即可。"),
    "privacy": ("隐私与加密", "加密保存的内容，以及自动提取的记忆最长保留多久。"),
}

ITEMS: dict[str, Item] = {
    # basic
    "enable_user_memory": Item(
        "启用成员记忆", "关闭后回复不再带上记忆，模型也无法保存新记忆；已保存的记忆留在磁盘上，重新开启后照常使用。"
    ),
    "memory_max_per_user": Item(
        "每位成员在每个群最多记几条",
        "记满后不会悄悄丢掉旧的：机器人会先请成员删掉或替换一条。",
    ),
    "memory_inject_limit": Item(
        "每次回复最多带上几条该成员自己的记忆",
        "先放该成员自己的要求，其余名额给与当前消息最相关的记忆。群规和群公共记忆另有名额（下一项），不占这里的名额；"
        "待办和情境记忆占这里的名额。0 表示回复时不带任何记忆（也不带群公共记忆、待办和情境记忆）。",
    ),
    "group_memory_inject_limit": Item(
        "每次回复最多带上几条群公共记忆",
        "群规和群公共的事实、偏好放在单独的「当前群组信息」部分，单独计数，不占成员自己的名额：先放群规，其余按与当前消息的相关度。"
        "0 表示回复时不带群公共记忆。",
    ),
    "memory_inject_char_budget": Item(
        "每次回复带上的记忆总字数上限",
        "带上的记忆合计不超过这么多字，放不下的次要记忆会被跳过。",
    ),
    "memory_max_content_length": Item("单条记忆最多多少字", "超过时机器人会请模型精简后再保存。"),
    "timezone": Item(
        "时区",
        "填 IANA 时区名，如 Asia/Shanghai、Asia/Tokyo。成员说的“明天下午三点”按这个时区理解，提醒也按它显示。"
        "留空：跟随 AstrBot 自己的时区设置，那里也没设时用 Asia/Shanghai。服务器时钟是 UTC 也没关系。"
        "填了无法识别的时区名时恢复为空（即跟随 AstrBot）。",
    ),
    # group memory
    "group_memory_writers": Item(
        "谁能添加群公共的事实和偏好",
        "群公共的事实和偏好对本群每位成员生效。无论选哪项，只有添加者本人或管理员能修改、删除它们。",
        labels=("所有成员", "仅管理员（AstrBot 管理员，以及平台上的群主和群管理员）"),
    ),
    "group_instruction_writers": Item(
        "谁能添加群规（群公共指令）",
        "群规会放进每位成员的每次回复里，所以默认只有管理员能添加。",
        labels=("仅管理员（AstrBot 管理员，以及平台上的群主和群管理员）", "所有成员"),
    ),
    "group_memory_max": Item("每个群最多几条群公共记忆", "0 表示关闭群公共记忆。"),
    "enable_global_memory": Item(
        "允许跨群通用的记忆",
        "开启后，成员明确要求“在所有群都记住”时（如偏好的语言），这条记忆在同一平台的所有群都生效。"
        "关闭时不读取也不使用任何跨群记忆。",
    ),
    # attachments
    "enable_attachments": Item(
        "保存记忆时保留图片和文件",
        "开启后，成员的消息（或引用的消息）带着图片或文件、且模型在这一轮保存了记忆时，这条记忆保留第一个图片或文件的副本，"
        "保存在插件数据目录（同一群内同一张图只存一份，配置了加密密钥时加密保存）。"
        "只保存 PNG、JPEG、GIF、WebP 图片和 .txt/.md/.csv/.json/.log 纯文本、PDF 文档；SVG、可执行文件、压缩包、损坏的文件一律拒绝。"
        "关闭后只保存文字，已保存的图片和文件不受影响。",
    ),
    "attachment_max_file_mb": Item(
        "单个图片或文件最大多少 MB",
        "更大的文件不保存，模型会告诉成员原因；图片另有 4000 万像素（WebP 1000 万、JPEG 5000 万像素）的上限。",
    ),
    "attachment_max_per_member": Item(
        "每位成员在每个群最多保存几个图片或文件",
        "计入该成员自己的记忆和他添加的群公共记忆里的图片和文件；达到后新的不保存，请成员先删掉不需要的记忆。",
    ),
    "attachment_max_mb_per_member": Item(
        "每位成员在每个群的图片和文件合计最多多少 MB", "同一张图被多条记忆引用只算一次。"
    ),
    "attachment_max_per_group": Item(
        "每个群最多保存几个图片或文件", "本群所有记忆（含归档）引用的不同图片和文件合计。"
    ),
    "attachment_max_mb_per_group": Item(
        "每个群的图片和文件合计最多多少 MB", "本群所有记忆（含归档）引用的不同图片和文件的大小合计。"
    ),
    # recall
    "embedding_provider_id": Item(
        "向量模型（可选）",
        "填 AstrBot「模型提供商」页「嵌入」分类中某个提供商的 ID，即用它按意思召回记忆；留空时用内置模型（下一项），内置模型也关闭时只按词语匹配。"
        "中文群请选多语言的向量模型。",
    ),
    "recall_builtin_model": Item(
        "没配置向量模型时用内置模型",
        "开启时，上一项留空的情况下用插件自带的多语言模型（USE-multilingual-v3，随插件安装，约 33 MB，不联网、不另起服务）按意思召回记忆，"
        "英文问中文记忆、换个说法提问也能找到；在本机 CPU 上运行，约占 140 MB 内存。上一项填了提供商时用提供商，这一项不起作用。"
        "关闭后只按词语匹配。",
    ),
    "embedding_weight": Item(
        "按意思匹配的权重",
        "意思明显相近（远高于偶然水平）的记忆最多被提到多高：0 只看词语；越大提得越高，但总在明确的词语匹配之后，所以不会比只按词语差。向量模型不擅长中文时调低。",
        slider_step=0.05,
    ),
    "embedding_timeout_ms": Item(
        "按意思匹配的等待上限（毫秒）",
        "向量模型在这段时间内没有给出结果时，本次回复改按词语匹配，不让回复等待；连续 3 次失败后暂停调用 60 秒。自建的 CPU 向量服务且群很活跃时可改为 800。",
    ),
    "recall_max_relevant": Item(
        "按相关度挑选记忆",
        "这是一个开关：0 关闭，只按记忆类型和新旧挑选；大于 0 开启，与当前消息相关的记忆竞争所有剩余名额。"
        "大于 0 时填几都一样，不限制条数（限制条数会漏掉答案）。",
    ),
    "recall_relevance_threshold": Item(
        "相关度门槛（相对最佳匹配）",
        "相关度达到“本条消息最佳匹配 × 这个比例”的记忆才按相关度竞争名额，其余按类型和新旧排序。"
        "0 表示与消息有任何共同词语就算相关。",
        slider_step=0.05,
    ),
    "recall_group_instruction_share": Item(
        "群公共记忆最多先占的字数比例",
        "群规和群公共记忆最多先占每次回复字数上限的这个比例，保证成员自己的记忆不被挤掉；成员自己的记忆没用完的字数，"
        "群公共记忆可以接着用。0 表示群公共记忆只用成员自己的记忆剩下的字数。条数由「每次回复最多带上几条群公共记忆」限制。",
        slider_step=0.05,
    ),
    "memory_inject_position": Item(
        "记忆放在哪里",
        "放在成员消息里（默认）：记忆、待办、情境记忆和当前时间作为本条消息的临时附加内容交给模型，不存入对话历史；"
        "系统提示词对每位成员、每条消息都一样，模型服务商（DeepSeek、OpenAI、Anthropic 等）可以缓存提示词的前缀，"
        "费用更低、回复更快。放在系统提示词里：旧版的做法，系统提示词随成员和消息变化，之后的内容都无法命中缓存；"
        "只在所用模型明显更遵守系统提示词里的记忆时选它。AstrBot 4.24.0 以前没有临时附加内容，总是放在系统提示词里。",
        labels=(
            "成员消息里（默认）：系统提示词保持不变，可命中模型服务商的提示词缓存",
            "系统提示词里：旧版位置，提示词每次都变，无法命中缓存",
        ),
    ),
    # extraction
    "enable_background_extraction": Item(
        "自动从群聊中记住信息",
        "开启后插件阅读群里的全部消息（不只是 @机器人 的），每隔若干条或群里安静一会儿后，调用一次模型提取值得记住的事，"
        "也生成情境记忆。会产生额外的模型费用，可用 /memory stats 查看。",
    ),
    "extraction_provider_id": Item(
        "提取使用的模型（可选）",
        "留空使用该群当前的聊天模型。可以选一个更便宜的模型。",
        provider=True,
    ),
    "extraction_every_n_messages": Item(
        "每积累多少条消息提取一次",
        "大于「每个群最多暂存多少条消息」时，暂存上限会被调大到这个数（最多 500）。",
    ),
    "extraction_quiet_seconds": Item("群里安静多少秒后提取", "有还没处理的消息、且这段时间内没有新消息时提取一次。"),
    "extraction_buffer_size": Item("每个群最多暂存多少条消息", "提取进行中又来了更多消息时，超出的部分丢弃最早的。"),
    "extraction_max_operations": Item("每次提取最多改动几条记忆", "模型一次提出更多改动时，多出的不执行，记入日志。"),
    "extraction_excluded_groups": Item(
        "不观察的群",
        "每项一个群号，或 平台:群号（如 lark:oc_xxx）。这些群里的消息不会被自动提取、不生成情境记忆、不缓存名字；"
        "成员明确要求保存的记忆和待办照常可用。",
    ),
    "background_max_concurrent_calls": Item(
        "后台模型调用最多同时几个",
        "所有群的自动提取、复查、合并共用这个上限，其余排队；同一个群内的顺序不变。",
    ),
    "topic_labels_by_model": Item(
        "提取模型为话题起名：每次最多几个",
        "开启自动提取时，统计页和 /memory stats 的话题名由提取模型根据话题的关键词和群公共记忆、情境摘要写一个短名"
        "（不发给模型任何成员个人的记忆）；只为关键词变了的话题重新起名。0：不调用模型，用关键词作话题名。",
    ),
    # todos
    "enable_todos": Item(
        "启用待办与提醒",
        "成员可以让机器人记下待办，到点在群里 @ 成员提醒。飞书和 QQ（OneBot）支持到点提醒；其他平台只记录，不提醒。",
    ),
    "todo_reminder_lead_minutes": Item(
        "只有截止时间的待办提前多少分钟提醒",
        "只说了截止时间、没说何时提醒的待办，在截止前这么久提醒；已经不足这么久时不再单独提醒。",
    ),
    "reminder_mention_all": Item("全群待办提醒时 @所有人", "关闭（默认）时，全群待办的提醒是一条普通群消息。"),
    "todo_inject_limit": Item(
        "每次回复最多带上几条待办",
        "该成员未完成的待办和本群近期的全群待办，占用「每次回复最多带上几条记忆」和字数上限中的名额。0 表示不带待办。",
    ),
    "todo_max_pending_per_member": Item(
        "每位成员最多几条未完成的待办", "计入分配给该成员的待办，以及该成员创建的全群待办。"
    ),
    "todo_max_per_group": Item(
        "每个群最多几条未完成的待办",
        "本群所有未完成的待办合计（成员的、全群的、从聊天中识别出待确认的）；达到后新增会被拒绝并说明原因。",
    ),
    "todo_expiry_grace_hours": Item(
        "截止后多少小时仍未完成算过期", "只有提醒时间的一次性待办以提醒时间为截止。过期的待办仍能在列表中看到。"
    ),
    "todo_keep_days": Item(
        "已结束的待办保留几天", "已完成、已取消、已过期的待办在这么多天后从列表移除（变更记录里仍有它的历史）。"
    ),
    "reminder_max_lateness_minutes": Item(
        "提醒最多迟到多少分钟仍补发",
        "机器人离线期间到点的提醒，上线后在这个时限内补发一次并注明是补发；更晚的不再发送，在列表中标为“错过”。",
    ),
    "reminder_max_attempts": Item("提醒发送失败时最多尝试几次", "全部失败后标为“发送失败”，在待办列表中可以看到。"),
    "reminder_retry_base_seconds": Item(
        "第一次重试前等待几秒",
        "之后每次等待时间翻倍：按默认设置，3 次尝试约在 10 分钟内完成。",
    ),
    # episodes
    "episode_inject_limit": Item(
        "每次回复最多带上几段情境记忆",
        "成员说“上次”“昨天”等时间词时按时间挑选，其余按相关度；占用「每次回复最多带上几条记忆」和字数上限中的名额。"
        "0 表示不带。",
    ),
    "episode_segment_messages": Item(
        "多少条消息切成一段", "每个群的对话每积累这么多条消息（或安静下来）就概括成一段：谁和谁在什么时候聊了什么。"
    ),
    "episode_quiet_minutes": Item("群里安静多少分钟算一段结束", "安静这么久后，当前这段对话结束并被概括。"),
    "episode_decay_after_days": Item(
        "情境记忆多少天后开始淡出", "之后每天按下一项的比例降低重要度，越旧越不容易被带上。"
    ),
    "episode_decay_factor": Item("情境记忆每天保留的比例", "1 表示不淡出。", slider_step=0.05),
    "episode_max_age_days": Item("情境记忆多少天后归档", "归档的片段不再被带上，在「归档保留几天」之后彻底清除。"),
    # aging
    "memory_decay_after_days": Item(
        "自动记忆多少天没被用到后开始淡出",
        "只影响自动提取的记忆：这么多天没被回复用到后，每天按下一项的比例降低重要度。"
        "成员明确要求记住的记忆和核心记忆永不淡出。",
    ),
    "memory_decay_factor": Item("自动记忆每天保留的比例", "1 表示不淡出。", slider_step=0.01),
    "memory_core_importance": Item(
        "核心记忆的重要度", "重要度达到这个值（或复查后升级）的记忆是核心记忆，永不淡出。", slider_step=0.01
    ),
    "usage_boost": Item(
        "被回复用到一次增加的重要度",
        "下一次自动提取时顺带判断回复是否真的用到了带上的记忆；只被带上而没用到的不加。",
        slider_step=0.01,
    ),
    "review_promote_at": Item(
        "重要度达到多少时请模型复查是否升为核心",
        "模型会决定：升为核心记忆、保持不变，或删除。",
        slider_step=0.01,
    ),
    "review_decay_below": Item(
        "重要度低于多少时请模型复查是否保留",
        "模型会决定：保留（重要度回到默认的 0.5），或归档。",
        slider_step=0.01,
    ),
    "review_max_search_rounds": Item(
        "复查时最多查找几轮", "复查的模型可以在同一成员的记忆里按关键词查找，最多这么多轮。"
    ),
    "review_daily_cap": Item("每个群每天最多复查几次", "0 表示不复查。"),
    "consolidation_daily_cap": Item(
        "每个群每天最多合并几次",
        "定期把同一成员关于同一件事的近似记忆合并成一条（保留来源，可撤销）。0 表示不合并。",
    ),
    "archive_below_importance": Item(
        "重要度低于多少时归档",
        "归档的记忆不再被带上，可以恢复，在「归档保留几天」之后彻底清除。",
        slider_step=0.01,
    ),
    "archive_unused_days": Item(
        "自动记忆多少天没被用到且不重要时归档", "重要度不高于下一项的自动记忆，这么多天没被用到就归档。"
    ),
    "archive_unused_max_importance": Item(
        "长期不用而归档的重要度上限", "重要度高于这个值的记忆不会因为长期不用而归档。", slider_step=0.01
    ),
    "archive_retention_days": Item(
        "归档保留几天", "归档的记忆和情境记忆保留这么多天后彻底清除，在此之前可以在记忆管理页恢复。"
    ),
    "maintenance_interval_hours": Item(
        "多久整理一次（小时）",
        "每个群每隔这么久整理一次：淡出和归档、复查、合并、清除过期的归档。在后台错开进行，不影响回复。",
    ),
    # storage
    "storage_backend": Item(
        "存储方式",
        "切换前先停掉 AstrBot，在 AstrBot 根目录下用它的 Python 运行 "
        "data/plugins/astrbot_plugin_user_memory/scripts/migrate_store.py 迁移数据（插件目录里就有，从插件市场安装的也有；"
        "用法见插件文档 docs/storage.md）；选了 PostgreSQL 却连不上时，插件不会改回 JSON 文件，而是报告错误。",
        labels=(
            "JSON 文件（默认）：每个群一个文件，放在插件数据目录，无需数据库",
            "PostgreSQL：多个 AstrBot 实例（同一机器人的扩容或热备）共用一份记忆，需安装 asyncpg",
        ),
    ),
    "postgres_dsn": Item(
        "PostgreSQL 连接串（建议用环境变量）",
        "推荐：把连接串设为 AstrBot 进程的环境变量 USER_MEMORY_POSTGRES_DSN（它优先），这里留空。"
        "填在这里的密码以明文保存在 AstrBot 的配置文件里，任何能登录控制台的人都能读到；记忆管理页会提醒。"
        "格式如 postgresql://user:password@127.0.0.1:5432/astrbot_memory。",
        secret=True,
    ),
    "postgres_instance_name": Item(
        "本实例的名称（可选）",
        "多个实例共用 PostgreSQL 时，用来区分谁在负责提醒和整理，在 /memory status 中显示。留空：主机名加进程号。",
    ),
    "memory_cache_max_mb": Item(
        "记忆缓存上限（MB）",
        "所有群的记忆（连同语义召回的向量）在内存中大约占用的上限，群加载时就检查。超过时先移出最久没有用到的空闲群"
        "（至少 10 分钟没有回复、工具或整理用到它），仍超过时再移出最久没用到的活跃群（下次回复时从存储读回，慢几毫秒）；"
        "有未写完的修改、正在使用的群和正在加载的群不移出。",
    ),
    "change_log_retention_days": Item(
        "变更记录保留详细内容几天",
        "变更记录比记忆本身大出一倍以上时，早于这么多天的条目只保留时间、操作者和对象，去掉内容；"
        "这些条目仍在历史中显示，但不能再撤销。",
    ),
    # privacy
    "encryption_key": Item(
        "加密密钥（建议用环境变量）",
        "设置后，记忆、待办、情境记忆、变更记录和向量的内容加密保存（AES-GCM）。"
        "推荐：把密钥设为 AstrBot 进程的环境变量 USER_MEMORY_ENCRYPTION_KEY（它优先），这里留空；"
        "填在这里的密钥以明文保存在配置文件里，任何能登录控制台的人都能读到。"
        "格式：32 字节的 base64 或 64 位十六进制，可在 AstrBot 根目录下用它的 Python 运行 "
        "data/plugins/astrbot_plugin_user_memory/scripts/rotate_key.py --new-key 生成（插件目录里就有）。"
        "丢失密钥就无法读取已加密的数据，务必另行备份。",
        secret=True,
    ),
    "extraction_max_age_days": Item(
        "自动记忆最长保留几天（0 为不限）",
        "只针对自动提取的记忆：从最后一次被用到或更新算起超过这么多天就归档，再过「归档保留几天」后清除。"
        "成员明确要求保存的记忆不受影响。",
    ),
}


def _default_text(default: Any) -> str:
    if isinstance(default, bool):
        return "开启" if default else "关闭"
    if isinstance(default, (str, tuple)) and not default:
        return "空"
    return f"{default:g}" if isinstance(default, float) else str(default)


def _number(value: float) -> str:
    """A bound as people write it: 1000000, not 1e+06; 0.05 as it is."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _range_text(name: str, default: Any) -> str:
    """The sentence every number's hint ends with: its range, its default, and what an invalid value does."""
    shown = _default_text(default)
    if name in _CHOICES:
        shown = ITEMS[name].labels[_CHOICES[name].index(default)].split("（")[0].split("：")[0]
    if name in _RANGES:
        low, high = _RANGES[name]
        # the page pulls a number typed outside the range back into it (`slider`); a value saved some other way
        # (an older AstrBot's page, a hand edit) takes the default, with the memory page's warning
        limits = f"范围 {_number(low)}–{_number(high)}，默认 {shown}"
        return f"{limits}；范围外的数会被拉回范围内，已存下的不合理值按默认值生效。"
    return f"默认{shown}。"


def slider(name: str, default: Any) -> dict[str, float]:
    """AstrBot's range option for a number, over the range `_settings` accepts: the page shows a slider between
    the bounds, and AstrBot 4.25.6 and later pull a number typed outside them back to the nearer bound when the
    box loses focus, before anything is saved (issue 35). A whole number steps by 1; a 0-1 value by its step."""
    low, high = _RANGES[name]
    if isinstance(default, int):
        return {"min": int(low), "max": int(high), "step": 1}
    return {"min": low, "max": high, "step": ITEMS[name].slider_step}


def _type_of(default: Any) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, tuple):
        return "list"
    return "string"


def _json_default(default: Any) -> Any:
    return list(default) if isinstance(default, tuple) else default


def _entry(name: str, default: Any) -> dict[str, Any]:
    item = ITEMS[name]
    entry: dict[str, Any] = {
        "description": item.label,
        "type": _type_of(default),
        "hint": f"{item.hint}{_range_text(name, default)}",
        "default": _json_default(default),
    }
    if name in _CHOICES:
        entry["options"] = list(_CHOICES[name])
        entry["labels"] = list(item.labels)
    if name in _RANGES:
        entry["slider"] = slider(name, default)
    if item.provider:
        entry["_special"] = "select_provider"
    if item.secret:
        entry["secret"] = True
        entry["obvious_hint"] = True
    return entry


def conf_schema() -> dict[str, Any]:
    """`_conf_schema.json`: the sections (objects) in order, then every setting's old flat key, hidden."""
    defaults = {f.name: f.default for f in fields(Settings)}
    schema: dict[str, Any] = {}
    for section, names in SECTIONS:
        title, hint = TITLES[section]
        schema[section] = {
            "description": title,
            "type": "object",
            "hint": hint,
            "items": {name: _entry(name, defaults[name]) for name in names},
        }
    for name, default in defaults.items():
        schema[name] = {
            "description": f"{ITEMS[name].label}（旧版位置，已移入分组）",
            "type": _type_of(default),
            "default": _json_default(default),
            "invisible": True,
        }
    return schema


def warning_json(warning: SettingWarning) -> dict[str, Any]:
    """A warning as the dashboard page shows it: with the section and label the config page shows."""
    section = next((s for s, names in SECTIONS if warning.setting in names), "")
    item = ITEMS.get(warning.setting)
    return {
        **warning.as_json(),
        "section": TITLES[section][0] if section else "",
        "label": item.label if item else warning.setting,
    }

"""`/memory status`: the settings in effect, what was corrected in them, and whether the parts are running."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from ._members import Roster
from ._settings import Settings


@dataclass(frozen=True)
class Health:
    groups_loaded: int
    extraction_on: bool
    pending_here: int
    pending_all: int
    calls_running: int  # background model calls holding a slot of the global limit
    calls_queued: int  # ... and waiting for one
    calls_limit: int
    embedding: str  # one line on the embedding provider, e.g. "未配置（仅词法召回）"
    rosters_cached: int
    roster_here: Roster | None
    reminders: str = "关闭"  # one line on the reminder scheduler
    maintenance: str = "关闭"  # one line on the maintenance scheduler (decay, archive, review)


def status_text(settings: Settings, warnings: Sequence[str], health: Health) -> str:
    lines = ["记忆插件状态", "", "【生效的配置】"]
    lines += [f"{f.name} = {_shown(getattr(settings, f.name))}" for f in fields(settings)]
    lines += ["", f"【配置警告】{len(warnings)} 条" + ("（已按上述生效值写回配置）" if warnings else "")]
    lines += [f"- {w}" for w in warnings]
    roster = health.roster_here
    members = ("尚未获取（正在后台获取，获取前用平台给的名字）" if roster is None else
               f"{len(roster.names)} 个名字，群主 {'已知' if roster.owner else '未知'}，群管理员 {len(roster.admins)} 人")
    extraction = (f"开启：本群待处理 {health.pending_here} 条，所有群共 {health.pending_all} 条，"
                  f"后台模型调用 {health.calls_running} 个进行中、{health.calls_queued} 个排队（上限 {health.calls_limit}）"
                  if health.extraction_on else "关闭")
    lines += ["", "【运行状况】",
              f"已加载的群：{health.groups_loaded}",
              f"后台提取：{extraction}",
              f"向量召回：{health.embedding}",
              f"群成员名单：本群 {members}；已缓存 {health.rosters_cached} 个群",
              f"待办提醒：{health.reminders}",
              f"记忆维护：{health.maintenance}"]
    return "\n".join(lines)


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value)

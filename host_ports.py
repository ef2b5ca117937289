"""AstrBot adapter for the service's ports (`memory.Ports`): what the memory service asks of AstrBot, and only
AstrBot can do. Post to a group with a real @-mention, call a chat model, an embedding provider by id, a group's
roster (AstrBot's `get_group`; QQ through OneBot's own member list), the platform instances running now, the host's
timezone and a kept picture's caption (`reply_pictures.describe_picture`). Host mechanics only."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import astrbot.api.message_components as Comp
from astrbot.api import logger
from astrbot.api.event import AstrMessageEvent, MessageChain
from astrbot.api.star import Context

from .astrbot_support import PLUGIN_NAME
from .memory import EmbeddingModel, MemoryPluginError, ModelAnswer, OutgoingMessage, Ports, Roster, Speaker
from .reply_pictures import describe_picture


class AstrBotPorts:
    """The ports on one AstrBot `Context`."""

    def __init__(self, context: Context) -> None:
        self.context = context

    def ports(self) -> Ports:
        return Ports(
            send=self.send,
            generate=self.generate,
            roster=self.roster,
            running_platforms=self.running_platforms,
            embedding_model=self.embedding_model,
            host_timezone=self.host_timezone(),
            caption=self.caption,
        )

    def host_timezone(self) -> str | None:
        try:
            zone = self.context.get_config().get("timezone")
        except Exception:  # no host config (a half-started host)
            return None
        return zone if isinstance(zone, str) else None

    def running_platforms(self) -> dict[str, str]:
        """The platform instances this AstrBot runs now, id -> adapter type (they load after the plugins: asked
        when needed)."""
        manager = getattr(self.context, "platform_manager", None)
        return {p.meta().id: p.meta().name for p in getattr(manager, "platform_insts", ())}

    def embedding_model(self, provider_id: str) -> EmbeddingModel | None:
        try:
            provider = self.context.get_provider_by_id(provider_id)
        except Exception:  # a half-started host must not stop the plugin from loading
            logger.exception(f"[{PLUGIN_NAME}] cannot look up embedding provider {provider_id!r}")
            return None
        if provider is None or not hasattr(provider, "get_embeddings"):
            return None
        meta = provider.meta()
        return EmbeddingModel(provider, f"{meta.id}/{meta.model or ''}")

    async def generate(self, system_prompt: str, prompt: str, *, provider_id: str, origin: str) -> ModelAnswer:
        """One chat call: the provider named, else the conversation's, else AstrBot's default chat model."""
        if not provider_id and origin:
            provider_id = await self.context.get_current_chat_provider_id(origin)
        elif not provider_id:
            newer = getattr(self.context, "get_using_provider_async", None)  # AstrBot 4.27.3+
            provider = await newer() if newer is not None else self.context.get_using_provider()
            if provider is None:
                raise MemoryPluginError("no chat model is configured for memory review")
            provider_id = provider.meta().id
        response = await self.context.llm_generate(
            chat_provider_id=provider_id, system_prompt=system_prompt, prompt=prompt
        )
        usage = response.usage
        return ModelAnswer(response.completion_text or "", usage.input if usage else 0, usage.output if usage else 0)

    async def caption(self, image: Callable[[], Awaitable[bytes]], mime: str, *, origin: str) -> str | None:
        """A kept picture's description by AstrBot's image-caption model (`reply_pictures.describe_picture`)."""
        return await describe_picture(self.context, image, origin=origin)

    async def send(self, origin: str, message: OutgoingMessage) -> bool:
        """Post a message to a group, with a real @-mention (Lark: open_id, QQ: number)."""
        chain = MessageChain()
        # AstrBot's OneBot adapter puts a space after every @ itself (Lark's does not): one space, not two
        gap = "" if self.running_platforms().get(origin.split(":", 1)[0]) == "aiocqhttp" else " "
        if message.mention is not None:
            mention = Comp.At(qq=message.mention.user_id, name=message.mention.name)
            chain.chain.extend([mention, Comp.Plain(f"{gap}{message.text}")])
        elif message.mention_all:
            chain.chain.extend([Comp.AtAll(), Comp.Plain(f"{gap}{message.text}")])
        else:
            chain.chain.append(Comp.Plain(message.text))
        return bool(await self.context.send_message(origin, chain))

    @staticmethod
    async def roster(speaker: Speaker) -> Roster | None:
        """The platform's member list, owner and admins, and the group's name (Lark: chat info and the paged chat
        members API; OneBot: group info and member list); None when the platform cannot tell (this time)."""
        event = speaker.handle
        if isinstance(event, AstrMessageEvent) and event.get_platform_name() == "aiocqhttp":
            return await _onebot_roster(event)
        group = await speaker.handle.get_group()
        if group is None or (
            group.members is None and not group.group_owner and not group.group_admins and not group.group_name
        ):
            return None
        return Roster.from_platform(
            {str(m.user_id): m.nickname for m in group.members or []},
            group.group_owner,
            group.group_admins,
            group.group_name,
        )


async def _onebot_roster(event: AstrMessageEvent) -> Roster | None:
    """QQ (OneBot v11): the group's member list naming each member by their group card (群名片), else their
    nickname, as QQ shows them in the group and as AstrBot names the sender of a message (AstrBot's own
    `get_group()` prefers the account nickname, so a member would go by two names); owner and admins from the
    members' roles, the group's name from its info. None when the OneBot implementation cannot tell (this time)."""
    bot, group_id = getattr(event, "bot", None), str(event.get_group_id())
    if bot is None or not group_id:
        return None
    routing = {"self_id": self_id} if (self_id := getattr(event.message_obj, "self_id", None)) else {}
    api_group_id: int | str = int(group_id) if group_id.isdigit() else group_id
    name = None
    try:
        info = await bot.call_action("get_group_info", group_id=api_group_id, **routing)
        name = info.get("group_name") if isinstance(info, dict) else None
    except Exception as e:  # the member list may still come
        logger.warning(f"[{PLUGIN_NAME}] OneBot get_group_info for group {group_id} failed: {e}")
    try:
        members = await bot.call_action("get_group_member_list", group_id=api_group_id, **routing)
    except Exception as e:
        logger.warning(f"[{PLUGIN_NAME}] OneBot get_group_member_list for group {group_id} failed: {e}")
        members = None
    rows = [m for m in members if isinstance(m, dict) and m.get("user_id") is not None] if members else []
    if not rows and not name:
        return None
    return Roster.from_platform(
        {str(m["user_id"]): m.get("card") or m.get("nickname") for m in rows},
        next((str(m["user_id"]) for m in rows if m.get("role") == "owner"), None),
        [str(m["user_id"]) for m in rows if m.get("role") == "admin"],
        name,
    )

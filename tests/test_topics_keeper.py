"""The kept analyses (issue 36): computed off the event loop when first asked for, served from what is kept, computed
again after a change (once for a burst), never for a group nobody viewed, a failure not retried until the next
change; a fixed clock."""

from __future__ import annotations

import asyncio
import threading

from analysis_kit import KEY, NOW, PROJECT_LI, PROJECT_WANG, SPORT_ZHANG, ZHANG, ZONE, memory, seeded

from memory._analysis.items import snapshot
from memory._analysis.keeper import Keeper
from memory._analysis.results import View
from memory._models import GroupKey


class Group:
    """The group's data as the store would give it, and who asked for it from which thread."""

    def __init__(self) -> None:
        self.doc = seeded()
        self.loads = 0
        self.fail = False

    async def load(self, key: GroupKey):
        self.loads += 1
        if self.fail:
            raise RuntimeError("storage down")
        return snapshot(key, self.doc, [])


def keeper(group: Group, **kw) -> Keeper:
    return Keeper(group.load, clock=lambda: NOW, zone=ZONE, **{"debounce": 0.0, **kw})


async def settle(k: Keeper) -> None:
    for _ in range(200):
        await asyncio.sleep(0.005)
        if k._worker is None or k._worker.done():
            return


async def test_first_request_computes_in_a_thread_then_serves_what_is_kept(monkeypatch):
    group = Group()
    k = keeper(group)
    threads = []
    real = asyncio.to_thread

    async def to_thread(func, *args, **kwargs):
        threads.append(func.__name__)
        return await real(lambda: (threads.append(threading.current_thread().name), func(*args, **kwargs))[1])

    monkeypatch.setattr("memory._analysis.keeper.asyncio.to_thread", to_thread)
    first = await k.result(KEY, wait=5.0)
    assert first.analysis is not None and first.fresh and not first.computing
    assert threads[0] == "analyse" and threads[1] != threading.main_thread().name
    assert first.analysis.computed_at == NOW  # the clock port's time
    again = await k.result(KEY)
    assert again.analysis is first.analysis and k.computations == 1 and group.loads == 1
    await k.close()


async def test_without_wait_the_first_answer_says_it_is_computing():
    k = keeper(Group())
    served = await k.result(KEY)
    assert served.analysis is None and served.computing and not served.fresh
    await settle(k)
    assert (await k.result(KEY)).fresh
    await k.close()


async def test_a_change_is_computed_again_once_per_burst():
    group = Group()
    k = keeper(group, debounce=0.05)
    await k.result(KEY, wait=5.0)
    group.doc = seeded(extra={ZHANG: ["篮球队周五加练"]})
    for _ in range(5):
        k.changed(KEY)
    stale = await k.result(KEY)
    assert not stale.fresh and stale.computing and stale.analysis is not None  # the old one meanwhile
    await settle(k)
    now = await k.result(KEY)
    assert now.fresh and k.computations == 2 and now.analysis is not None and now.analysis.generation == 5
    assert any(f"{ZHANG}-x0" in t.memory_ids for t in now.analysis.topics)
    await k.close()


async def test_a_group_nobody_viewed_is_never_computed():
    group = Group()
    k = keeper(group)
    k.changed(KEY)
    await settle(k)
    assert group.loads == 0 and k.computations == 0
    await k.close()


async def test_a_failure_is_not_retried_before_the_next_change(caplog):
    group = Group()
    group.fail = True
    k = keeper(group)
    served = await k.result(KEY, wait=5.0)
    assert served.analysis is None and not served.computing
    await k.result(KEY)
    await settle(k)
    assert group.loads == 1 and "could not be computed" in caplog.text
    group.fail = False
    k.changed(KEY)
    await settle(k)
    assert (await k.result(KEY)).fresh and group.loads == 2
    await k.close()


async def test_the_group_view_is_served_too():
    k = keeper(Group())
    served = await k.result(KEY, view=View.GROUP, wait=5.0)
    assert served.analysis is not None and served.analysis.view is View.GROUP
    assert all(not t.private_ids for t in served.analysis.topics)
    await k.close()


async def test_at_most_max_groups_are_kept():
    group = Group()
    k = keeper(group, max_groups=2)
    for i in range(3):
        await k.result(GroupKey("lark", f"oc_{i}"), wait=5.0)
    assert len(k._kept) == 2 and GroupKey("lark", "oc_0") not in k._kept
    await k.close()


async def three_members(service):
    """小王 and 小李 save the project's memories, 小张 the sport's, through `service`; the three speakers."""
    from service_kit import save, speaker

    wang, li, zhang = (
        speaker(u, "oc_team", name=n) for u, n in (("ou_wang", "小王"), ("ou_li", "小李"), ("ou_zhang", "小张"))
    )
    for who, texts in ((wang, PROJECT_WANG), (li, PROJECT_LI), (zhang, SPORT_ZHANG)):
        for text in texts:
            await save(service, who, text)
    return wang, li, zhang


async def test_the_service_keeps_topics_and_an_opt_out_everywhere_recomputes_them(make_service):
    service = make_service()
    wang, li, zhang = await three_members(service)
    key = wang.member.group
    service.topics._debounce = 0.0
    served = await service.topics.result(key, wait=10.0)
    assert served.analysis is not None and served.fresh
    assert {n.member for n in served.analysis.graph.nodes} == {"ou_wang", "ou_li", "ou_zhang"}
    await service.commands.privacy(zhang, True, "all")  # the platform's global document changes
    assert not (await service.topics.result(key)).fresh
    await settle(service.topics)
    after = await service.topics.result(key)
    assert after.fresh and after.analysis is not None
    assert {n.member for n in after.analysis.graph.nodes} == {"ou_wang", "ou_li"}
    await service.stop()


class Names:
    """A `Relabel` (the model's topic names): names the project topic once `release` is set, or fails."""

    def __init__(self, *, fail: bool = False) -> None:
        self.known: dict[str, str] = {}
        self.release = asyncio.Event()
        self.fail = fail
        self.asked = 0

    def kept(self, analysis):
        return {t.id: self.known[t.id] for t in analysis.topics if t.id in self.known}

    def wanted(self, analysis):
        return [t for t in analysis.topics if "w0" in t.memory_ids and t.id not in self.known]

    async def ask(self, analysis):
        self.asked += 1
        await self.release.wait()
        if self.fail:
            raise RuntimeError("model down")
        self.known.update({t.id: "支付服务发版" for t in self.wanted(analysis)})
        return self.kept(analysis)

    def forget(self, key):
        self.known.clear()


async def after_naming(k):
    """The result once the model's naming round is over (a bounded wait)."""
    for _ in range(200):
        served = await k.result(KEY)
        if not served.labelling:
            return served
        await asyncio.sleep(0.005)
    return await k.result(KEY)


async def test_the_model_s_names_follow_the_term_labels_in_both_views_without_holding_the_worker():
    names = Names()
    group = Group()
    k = keeper(group, relabel=names)
    first = await k.result(KEY, wait=5.0)
    assert first.analysis is not None and first.labelling  # the term labels at once, the names being asked for
    assert first.analysis.topics[0].label.startswith("支付服务") and not first.analysis.topics[0].named_by_model
    other = GroupKey(KEY.platform, "oc_other")
    assert (await k.result(other, wait=5.0)).analysis is not None  # the worker went on meanwhile
    names.release.set()
    admin = (await after_naming(k)).analysis
    group_view = (await k.result(KEY, view=View.GROUP)).analysis
    assert admin is not None and group_view is not None
    project = next(t for t in admin.topics if "w0" in t.memory_ids)
    assert project.label == "支付服务发版" and project.named_by_model and project.terms[0] == "支付服务"
    assert next(t for t in group_view.topics if t.id == project.id).label == "支付服务发版"  # the model saw only public
    asked = names.asked  # (the other group's topics were asked about too)
    k.changed(KEY)  # computed again: the kept name is on the new result at once, nothing asked
    await settle(k)
    again = await k.result(KEY)
    assert again.analysis is not admin and again.analysis.topics[0].label == "支付服务发版"
    assert not again.labelling and names.asked == asked
    await k.close()


async def test_a_failing_model_label_keeps_the_term_labels(caplog):
    names = Names(fail=True)
    names.release.set()
    k = keeper(Group(), relabel=names)
    await k.result(KEY, wait=5.0)
    admin = (await after_naming(k)).analysis
    assert admin is not None and admin.topics[0].label.startswith("支付服务") and not admin.topics[0].named_by_model
    assert "not written by the model" in caplog.text
    await k.close()


async def test_a_usage_only_or_log_only_commit_is_no_change():
    from memory._aging.usage import used

    group = Group()
    k = keeper(group)
    assert (await k.result(KEY, wait=5.0)).fresh
    k.changed(KEY, group.doc, [])  # the first commit seen sets what is compared
    await settle(k)
    assert (await k.result(KEY)).fresh
    computed = k.computations
    # a reply drew on two of 小张's memories: their last use and importance change (a new list, as the store does)
    users = dict(group.doc.users)
    zhang = users[ZHANG]
    users[ZHANG] = zhang.model_copy(update={"memories": [used(m, 0.1, NOW) for m in zhang.memories]})
    group.doc = group.doc.model_copy(update={"users": users})
    k.changed(KEY, group.doc, [])
    served = await k.result(KEY)
    assert served.fresh and not served.computing
    k.changed(KEY, group.doc, None)  # a change-log entry only (the topic-naming call): the same document
    await settle(k)
    assert (await k.result(KEY)).fresh and k.computations == computed
    # a new memory is a change
    users[ZHANG] = users[ZHANG].model_copy(update={"memories": [*users[ZHANG].memories, memory("z9", "篮球赛")]})
    group.doc = group.doc.model_copy(update={"users": users})
    k.changed(KEY, group.doc, [])
    assert not (await k.result(KEY)).fresh
    await settle(k)
    assert (await k.result(KEY)).fresh and k.computations == computed + 1


async def test_the_platform_s_global_document_changes_the_groups_only_when_its_opt_outs_do():
    from memory._models import GroupDocument

    group = Group()
    k = keeper(group)
    await k.result(KEY, wait=5.0)
    glob = GroupKey.global_for(KEY.platform)
    k.changed(glob, GroupDocument(platform=KEY.platform, group_id=glob.group_id))
    await settle(k)
    computed = k.computations
    k.changed(glob, GroupDocument(platform=KEY.platform, group_id=glob.group_id))  # a call entry: no change
    assert (await k.result(KEY)).fresh
    k.changed(glob, GroupDocument(platform=KEY.platform, group_id=glob.group_id, opted_out={ZHANG: NOW}))
    assert not (await k.result(KEY)).fresh
    await settle(k)
    assert k.computations == computed + 1


class OneAtATime:
    """A `Relabel` that names one topic per round (as `per_run` = 1 would), or none when `stingy`."""

    def __init__(self, *, stingy: bool = False) -> None:
        self.known: dict[str, str] = {}
        self.asked = 0
        self.stingy = stingy

    def kept(self, analysis):
        return {t.id: self.known[t.id] for t in analysis.topics if t.id in self.known}

    def wanted(self, analysis):
        return [t for t in analysis.topics if not t.is_other and t.id not in self.known][:1]

    async def ask(self, analysis):
        self.asked += 1
        if not self.stingy:
            self.known.update({t.id: f"名字{self.asked}" for t in self.wanted(analysis)})
        return self.kept(analysis)

    def forget(self, key):
        self.known.clear()


async def test_the_next_topics_are_named_right_after_without_a_recomputation():
    names = OneAtATime()
    k = keeper(Group(), relabel=names)
    await k.result(KEY, wait=5.0)
    admin = (await after_naming(k)).analysis
    assert admin is not None
    named = [t for t in admin.topics if not t.is_other]
    assert len(named) >= 2 and all(t.named_by_model for t in named)  # round after round
    assert names.asked == len(named) and k.computations == 1
    # a round that names nothing ends the rounds (a refusing model is not asked over and over)
    stingy = OneAtATime(stingy=True)
    k2 = keeper(Group(), relabel=stingy)
    await k2.result(KEY, wait=5.0)
    for _ in range(200):
        if not (await k2.result(KEY)).labelling:
            break
        await asyncio.sleep(0.005)
    assert stingy.asked == 1
    await k.close()
    await k2.close()


async def test_another_instance_s_save_on_postgresql_recomputes_this_one_s_topics(make_service, postgres_dsn):
    """Two instances on one database: 小张's new memory saved through instance b reaches a's kept topics (the commit
    relayed to a group a holds in memory), so a's statistics tab counts it after the recomputation."""
    from service_kit import save

    a, b = (
        make_service(storage_backend="postgres", postgres_dsn=postgres_dsn, postgres_instance_name=name)
        for name in ("a", "b")
    )
    await a.start()
    await b.start()
    wang, li, zhang = await three_members(a)
    key = wang.member.group
    a.topics._debounce = 0.0
    first = await a.topics.result(key, wait=10.0)
    assert first.analysis is not None and first.fresh
    before = first.analysis.memories
    await save(b, zhang, "下个月要去成都参加马拉松比赛")

    for _ in range(3000):  # the relay, the debounce and the thread: seconds at most on a loaded machine
        served = await a.topics.result(key)
        if served.fresh and served.analysis is not None and served.analysis.memories == before + 1:
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError(f"a never counted b's save: {served}")
    await b.stop()
    await a.stop()

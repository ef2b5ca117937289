"""Associative recall: memories tied to the strongest direct matches by the names and relations they share.

A member's memories name people and things by a name in one place and by a relation in another: "陈梦瑶是高中同学"
and "高中同学现在在瑞金医院当皮肤科医生", "女儿叫朵朵" and "女儿对芒果过敏", "My sister Lily" and "my sister lives in
Oslo". A message naming 陈梦瑶 shares nothing with the memory that answers it; the memory that ties the two does.

:class:`AssociationIndex` keeps, per caller (the member's own memories and their group's, exactly the candidates of
one recall view, so another member's memories never join), which *entities* each memory mentions:

* relation nouns (kin, partners, friends, work and service roles, pets: 女儿, 老婆, 同事, 导师, 室友, 猫, wife, boss …);
* names the memories themselves introduce: ``Y叫X`` / ``Y名叫X``, ``X是(我的)Y``, ``Y是X``, ``Y X`` (a relation
  noun followed by a name: 弟弟邱志远, 同事老钱, 领导 Vivian), ``X is my Y``, ``my Y(,) X``, ``my Y is called X``;
  nicknames in 「」 and titles in 《》; capitalised English words that do not start a sentence;

and the *aliases* those patterns declare (陈梦瑶 ~ 高中同学). It is updated memory by memory when memories change
(O(the memory's text), plus one scan of the memories for a name seen for the first time), never per message.

:meth:`AssociationIndex.associate` is the reply path's step: the few strongest direct matches (seeds) bring in, one
hop, the memories that mention an entity the seed mentions and the message does not (the seed "女儿叫朵朵" for the
message "朵朵有什么忌口吗" brings in the memories about 女儿), or an alias of an entity both mention. An associated
memory scores `WEIGHT` times its seed's score, below every seed; an entity mentioned by more than `MAX_FOLLOW`
memories is not followed (a hub says little), and at most `MAX_ADDED` memories are brought in per message.
"""

from __future__ import annotations

import heapq
import re
from operator import itemgetter
from collections import Counter
from collections.abc import Iterable, Mapping

from .lexical import normalize_text

# How many of the strongest direct matches bring in associates, and how strong (relative to the best score) a
# match must be to count as one.
SEEDS = 3
SEED_SHARE = 0.5
# ... and how strong in absolute terms (normalised lexical score: the share of the message's information the memory
# matches): below it a match rests on a few characters a long or chatty message shares with everything.
MIN_SEED = 0.05
# An associated memory's score: this times its seed's score (below the seed, and below direct matches as strong).
WEIGHT = 0.5
# Entities named by more memories than this are not followed; at most this many memories are added per message.
MAX_FOLLOW = 6
MAX_ADDED = 4

# Relation nouns: how memories refer to the people and animals in a member's life. Generic, not tuned per set.
_ZH_RELATIONS = """
女儿 儿子 大儿子 小儿子 大女儿 小女儿 孩子 大宝 二宝 宝宝 闺女 老婆 老公 爱人 妻子 丈夫 媳妇 太太 先生 对象 男朋友 女朋友
男友 女友 未婚妻 未婚夫 前任 妈妈 母亲 老妈 爸爸 父亲 老爸 爸妈 父母 婆婆 公公 岳母 岳父 丈母娘 老丈人 奶奶 爷爷 外婆 外公
姥姥 姥爷 哥哥 弟弟 姐姐 妹妹 表哥 表姐 表弟 表妹 堂哥 堂姐 堂弟 堂妹 嫂子 弟媳 姐夫 妹夫 舅舅 舅妈 叔叔 婶婶 阿姨 姑姑 姑父
姨妈 侄子 侄女 外甥 外甥女 孙子 孙女 亲戚 同事 同学 老同学 高中同学 大学同学 初中同学 小学同学 室友 舍友 朋友 好朋友 闺蜜
发小 兄弟 哥们 邻居 房东 租客 导师 老师 班主任 师傅 徒弟 师兄 师姐 师弟 师妹 学生 领导 前领导 上司 老板 经理 主管 下属
组长 队友 搭档 合伙人 客户 甲方 对接人 实习生 规培生 新人 保姆 阿姨 司机 教练 私教 家教 医生 主治医生 律师 会计
猫 狗 猫咪 小猫 小狗 狗狗 宠物 鹦鹉 兔子 仓鼠
"""
_EN_RELATIONS = """
wife husband daughter son kid kids child children mom mum mother dad father parents sister brother grandma grandpa
grandmother grandfather aunt uncle cousin niece nephew girlfriend boyfriend partner fiance fiancee friend roommate
flatmate neighbor neighbour colleague coworker boss manager mentor advisor supervisor teacher tutor coach doctor
landlord client dog cat puppy kitten pet
"""
ZH_RELATIONS: frozenset[str] = frozenset(_ZH_RELATIONS.split())
EN_RELATIONS: frozenset[str] = frozenset(_EN_RELATIONS.split())
_ZH_LENGTHS = sorted({len(noun) for noun in ZH_RELATIONS}, reverse=True)

# Common Chinese surnames, for names after a relation noun (弟弟邱志远, 保姆王阿姨).
_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆"
    "汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
)
_NAME_PREFIXES = frozenset("老小阿")
# Two-character words that start like a nickname (小航, 老钱, 阿哲) and are not one.
_NOT_NICKNAMES = frozenset("小学 小时 小区 小孩 小组 小心 小说 小吃 小事 老家 老人 老是 老同 老大 阿姨".split())
_PRONOUNS = frozenset("他她它我你")
_MEASURE = frozenset("只个位名条")
# Characters that end a name: function words and what typically follows a name in a memory.
_NAME_END = frozenset("的了是在和与跟也都就还又很有没不这那对从向给让被把每今现说住做当去来要会能想已正刚")
_DIGITS = frozenset("0123456789一二三四五六七八九十两日末")

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUN = re.compile(rf"[{_CJK}]+")
_BRACKETED = re.compile(r"「([^」]{1,20})」|《([^》]{1,30})》")
_CAPITALISED = re.compile(r"(?<![A-Za-z0-9])([A-Z][a-z]+(?:[ -][A-Z][a-z]+)?)")
_SENTENCE_START = re.compile(r"(?:^|[.!?。！？\n]\s*)$")
_CALLED = re.compile(rf"([^。！？.!?]*?)(?:名字叫|名叫|叫做|叫)([{_CJK}A-Za-z]+)")
_IS = re.compile(rf"([{_CJK}A-Za-z]+)是(?:我的|我|的)?([{_CJK}A-Za-z]+)")
_EN_IS_MY = re.compile(r"\b([A-Z][a-z]+) is (?:my|our) ([a-z]+)")
_EN_MY = re.compile(r"\b(?i:my|our) ([a-z]+)(?:'s name)?(?:,| is called| is named| named| called| is)? ([A-Z][a-z]+)")


def _relation_suffix(run: str) -> str | None:
    """The longest relation noun `run` ends with."""
    for n in _ZH_LENGTHS:
        if len(run) >= n and run[-n:] in ZH_RELATIONS:
            return run[-n:]
    return None


def _relation_prefix(run: str) -> str | None:
    """The longest relation noun `run` starts with."""
    for n in _ZH_LENGTHS:
        if run[:n] in ZH_RELATIONS and len(run) >= n:
            return run[:n]
    return None


def _zh_relations_in(text: str) -> set[str]:
    """Every relation noun that occurs in `text` (and the shorter ones inside it: 高中同学 holds 同学)."""
    found = set()
    for i in range(len(text)):
        for n in _ZH_LENGTHS:
            if text[i : i + n] in ZH_RELATIONS:
                found.add(text[i : i + n])
    return found


def _name_at(text: str) -> str | None:
    """A name at the start of `text` (a CJK run or a capitalised word): up to the first character that ends one,
    2-6 characters; None when what follows is not name-like."""
    if text[:1].isascii():
        word = re.match(r"[A-Za-z]+", text)
        return word.group(0) if word and len(word.group(0)) > 1 else None
    end = 0
    while end < len(text) and end < 6 and text[end] not in _NAME_END:
        end += 1
    name = text[:end]
    if name[:1] in _PRONOUNS or name[:1] in _MEASURE:  # 叫他糖糖, 是只柯基
        name = name[1:]
    if len(name) < 2 or (name[1] in _DIGITS and name[0] in "周礼星"):
        return None
    return name


def _person_after_relation(text: str) -> str | None:
    """A person's name right after a relation noun (弟弟邱志远 → 邱志远, 同事老钱 → 老钱), by its shape: a common
    surname or 老/小/阿 and one or two more characters."""
    if len(text) < 2 or (text[0] not in _SURNAMES and text[0] not in _NAME_PREFIXES):
        return None
    if text[1] in _NAME_END or (text[0] in "周礼星" and text[1] in _DIGITS):
        return None
    name = _name_at(text)
    if name is None:
        return None
    if name[0] in _NAME_PREFIXES and name[0] not in _SURNAMES:
        name = name[:2]
        return None if name in _NOT_NICKNAMES else name
    return name[:4] if name[1:3] == "阿姨" else name[:3]


def _last_relation(text: str) -> str | None:
    """The relation noun that ends last in `text` (the longest of those ending there)."""
    for end in range(len(text), 0, -1):
        noun = _relation_suffix(text[max(0, end - _ZH_LENGTHS[0]) : end])
        if noun is not None:
            return noun
    return None


def extract(content: str) -> tuple[set[str], list[tuple[str, str]]]:
    """The names `content` introduces and the aliases it declares (each a pair of entities), casefolded."""
    names: set[str] = set()
    aliases: list[tuple[str, str]] = []
    for m in _BRACKETED.finditer(content):
        names.add(normalize_text(m.group(1) or m.group(2)).strip())
    for m in _CAPITALISED.finditer(content):
        if not _SENTENCE_START.search(content[: m.start()]):
            names.add(normalize_text(m.group(1)))
    text = normalize_text(content)
    for m in _CALLED.finditer(text):
        noun, name = _last_relation(m.group(1)), _name_at(m.group(2))
        if name is not None:
            names.add(name)
            if noun is not None:
                aliases.append((noun, name))
    for m in _IS.finditer(text):
        left, right = m.group(1), m.group(2)
        noun_left, noun_right = _relation_suffix(left), _relation_prefix(right)
        if noun_left is not None and noun_right is None:  # 客户是鲜果时光, 老板是黄总
            name = _name_at(right)
            if name is not None:
                names.add(name)
                aliases.append((noun_left, name))
        elif noun_left is None and noun_right is not None:  # 陈梦瑶是高中同学, 陈梦瑶是我同事
            tail = _relation_suffix(right[:6]) if right[:6].endswith(noun_right) else None
            noun = right[:6] if tail is not None else noun_right
            lead = _relation_prefix(left)
            name = left[len(lead) :] if lead is not None else left
            name = name[-4:] if not name.isascii() else name
            if len(name) >= 2:
                names.update((name, noun))
                aliases.append((name, noun))
    for m in _RUN.finditer(text):  # 弟弟邱志远, 同事老钱
        run = m.group(0)
        for start in range(len(run) - 2):
            noun = _relation_prefix(run[start:])
            if noun is None:
                continue
            name = _person_after_relation(run[start + len(noun) :])
            if name is not None:
                names.add(name)
                aliases.append((noun, name))
    for m in re.finditer(r"([\u3400-\u9fff]{1,6})\s+([A-Z][a-z]+)", content):  # 领导 Vivian
        noun = _relation_suffix(m.group(1))
        if noun is not None:
            aliases.append((noun, m.group(2).casefold()))
    for m in _EN_IS_MY.finditer(content):
        if m.group(2) in EN_RELATIONS:
            aliases.append((m.group(1).casefold(), m.group(2)))
    for m in _EN_MY.finditer(content):
        if m.group(1) in EN_RELATIONS:
            aliases.append((m.group(1), m.group(2).casefold()))
            names.add(m.group(2).casefold())
    return names, aliases


_EN_WORD = re.compile(r"[a-z]+")


def _mentions(text: str, vocabulary: Iterable[str]) -> set[str]:
    """The entities of `vocabulary` (and the relation nouns) that normalised `text` mentions."""
    found = _zh_relations_in(text)
    found.update(w for w in _EN_WORD.findall(text) if w in EN_RELATIONS)
    for entity in vocabulary:
        if entity in text:
            found.add(entity)
    return found


class AssociationIndex:
    """Per caller: the entities each memory mentions and the aliases the memories declare (see the module doc)."""

    __slots__ = ("_aliases", "_declared", "_mentioned_by", "_mentions", "_names", "_texts")

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}  # memory id -> normalised content
        self._declared: dict[str, tuple[set[str], list[tuple[str, str]]]] = {}  # memory id -> extract()
        self._names: Counter[str] = Counter()  # introduced names -> how many memories introduce them
        self._aliases: dict[str, Counter[str]] = {}  # entity -> aliased entity -> how many memories say so
        self._mentions: dict[str, set[str]] = {}  # memory id -> entities it mentions
        self._mentioned_by: dict[str, set[str]] = {}  # entity -> memory ids

    def __len__(self) -> int:
        return len(self._texts)

    def add(self, memory_id: str, content: str) -> None:
        if memory_id in self._texts:
            self.remove(memory_id)
        text = normalize_text(content)
        self._texts[memory_id] = text
        names, aliases = extract(content)
        self._declared[memory_id] = (names, aliases)
        new = [n for n in names if not self._names[n]]
        self._names.update(names)
        for a, b in aliases:
            if a != b:
                self._aliases.setdefault(a, Counter())[b] += 1
                self._aliases.setdefault(b, Counter())[a] += 1
        self._set_mentions(memory_id, _mentions(text, self._names))
        for name in new:  # a name seen for the first time: the memories already indexed that mention it
            for other, other_text in self._texts.items():
                if other != memory_id and name in other_text:
                    self._mentions[other].add(name)
                    self._mentioned_by.setdefault(name, set()).add(other)

    update = add

    def remove(self, memory_id: str) -> bool:
        if memory_id not in self._texts:
            return False
        del self._texts[memory_id]
        names, aliases = self._declared.pop(memory_id)
        self._names.subtract(names)
        for a, b in aliases:
            for x, y in ((a, b), (b, a)):
                counts = self._aliases.get(x)
                if counts is not None:
                    counts[y] -= 1
                    if counts[y] <= 0:
                        del counts[y]
                    if not counts:
                        del self._aliases[x]
        self._set_mentions(memory_id, set())
        del self._mentions[memory_id]
        for name in names:
            if self._names[name] <= 0:
                del self._names[name]
                if name in ZH_RELATIONS or name in EN_RELATIONS:
                    continue
                for other in self._mentioned_by.pop(name, set()):
                    self._mentions[other].discard(name)
        return True

    def _set_mentions(self, memory_id: str, entities: set[str]) -> None:
        for entity in self._mentions.get(memory_id, set()) - entities:
            holders = self._mentioned_by.get(entity)
            if holders is not None:
                holders.discard(memory_id)
                if not holders:
                    del self._mentioned_by[entity]
        for entity in entities:
            self._mentioned_by.setdefault(entity, set()).add(memory_id)
        self._mentions[memory_id] = entities

    def mentions(self, memory_id: str) -> frozenset[str]:
        return frozenset(self._mentions.get(memory_id, ()))

    def aliases(self, entity: str) -> frozenset[str]:
        return frozenset(self._aliases.get(entity, ()))

    def associate(self, relevance: Mapping[str, float], query: str) -> Mapping[str, float]:
        """`relevance` (memory id -> direct score) with the memories tied to its strongest matches added, one hop,
        each at `WEIGHT` times its seed's score unless its own score is higher (see the module doc). `query` is the
        message as relevance scored it."""
        if not relevance or not self._mentioned_by or WEIGHT <= 0.0:
            return relevance
        best = max(relevance.values())
        if best < MIN_SEED:
            return relevance
        floor = max(SEED_SHARE * best, MIN_SEED)
        seeds = heapq.nlargest(SEEDS, relevance.items(), key=itemgetter(1))
        message: str | None = None
        added: dict[str, float] = {}
        for seed, score in seeds:
            if score < floor:
                break
            entities = self._mentions.get(seed)
            if not entities:
                continue
            if message is None:
                message = normalize_text(query)
            follow: set[str] = set()
            for entity in entities:
                if entity in message:
                    follow.update(a for a in self._aliases.get(entity, ()) if a not in message)
                else:
                    follow.add(entity)
            tied = score * WEIGHT
            for entity in follow:
                holders = self._mentioned_by.get(entity, ())
                if len(holders) > MAX_FOLLOW:
                    continue
                for memory_id in holders:
                    if memory_id != seed and relevance.get(memory_id, 0.0) < tied and added.get(memory_id, 0.0) < tied:
                        added[memory_id] = tied
        if not added:
            return relevance
        result = dict(relevance)
        chosen = added.items() if len(added) <= MAX_ADDED else heapq.nsmallest(MAX_ADDED, added.items(), key=_by_score)
        for memory_id, tied in chosen:
            result[memory_id] = tied
        return result


def _by_score(item: tuple[str, float]) -> tuple[float, str]:
    return (-item[1], item[0])

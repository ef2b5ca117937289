"""Source of bench/data/zh_assistant_assoc.json: the associative / set / category / paraphrase questions of issue 21.

Hand-written text (memories, questions, gold sets, tags); only the timestamps are generated, from a fixed seed,
so the JSON is reproducible: `.venv/bin/python bench/zh_assistant_assoc_src.py` rewrites it. Format and checks:
bench/zh_assistant.py; protocol: bench/RECALL.md ("Associative, set and category questions").

Memory lines: "key|t|content" with t = i (instruction), p (preference), f (fact); the id is "<member>.<key>".
Question lines: "speaker|tags|gold keys|text" (gold keys of the speaker; "g:" prefix for a group memory).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "zh_assistant_assoc.json"
NOW = 1750039200  # 2025-06-16 10:00 +08:00, the same reference time as zh_assistant.json
TYPES = {"i": "instruction", "p": "preference", "f": "fact"}

GROUPS: list[dict] = [
    {
        "id": "g5",
        "name": "青禾设计·品牌组",
        "platform": "lark",
        "memories": """
lang|i|群里回复用简体中文，设计术语可以保留英文|peng
weekly|f|每周五下午 5 点前交周报，发到品牌组的共享文件夹|hemin
office|f|公司在徐汇滨江西岸，5 号楼 12 层|peng
print|f|打样统一找漕河泾那家雅昌印务，下单前要先报何敏审批|hemin
nocall|i|晚上 10 点以后不要在群里 @ 人，急事打电话|peng
""",
        "members": [
            {
                "id": "zhouxw",
                "name": "周晓雯",
                "nick": "晓雯",
                "memories": """
nick|i|叫她晓雯就好，不用叫周老师
brief|i|回答尽量分点列出来，别太长
job|f|在青禾设计做资深视觉设计师，主要做包装设计
daughter|f|女儿叫朵朵，今年 6 岁，上幼儿园大班
son|f|儿子叫小航，今年 9 岁，读三年级
mango|f|女儿对芒果过敏，吃了嘴巴周围会起红疹
piano|f|女儿每周六上午上钢琴课，老师姓钱
football|f|儿子在学校足球队踢前锋，周四放学后训练
myopia|f|儿子有点近视，左眼 150 度，右眼 100 度
husband|f|老公叫陆川，在银行上班，经常出差
husband.cat|f|老公对猫毛过敏，一碰就打喷嚏
mil|f|婆婆跟他们住在一起，平时帮忙接送孩子
mil.knee|f|婆婆膝盖不好，走远路会疼
home|f|住在莘庄，小区是电梯房
commute|f|每天开车上班，单程 40 分钟
car|f|开一辆白色的大众途观，去年刚保养过
coffee|p|只喝燕麦拿铁，不加糖
lactose|f|乳糖不耐受，喝牛奶会拉肚子
tool|f|常用 Figma 和 Illustrator 做设计稿
client|f|手上最大的客户是山泉记，做矿泉水包装改版
client.contact|f|山泉记那边的对接人是刘总，说话很直，喜欢当面沟通
deadline|f|山泉记包装终稿 6 月 27 日交
yoga|f|每周二、周四晚上去上瑜伽课
book|f|《额尔古纳河右岸》读完了，后劲很大
book2|f|睡前在翻《被讨厌的勇气》，才看了一半
drama|f|这阵子在追《繁花》，胡歌演得真好
movie|f|周末和老公看了《热辣滚烫》，哭成狗
anniv|f|结婚纪念日是 7 月 8 日
""",
            },
            {
                "id": "peng",
                "name": "彭磊",
                "nick": "彭哥",
                "memories": """
nick|i|大家都叫他彭哥
style|i|说话直接点，不用客套
job|f|青禾设计的创意总监，带品牌组 8 个人
dog|f|家里的狗是只柯基，叫可乐，4 岁
dog.vet|f|狗的疫苗每年 9 月打，在徐汇的瑞鹏宠物医院
dog.leg|f|狗后腿做过手术，不能爬太多楼梯
wife|f|老婆叫林静，是中学英语老师
wife.gift|f|老婆生日是 8 月 3 日，平时喜欢香薰蜡烛
father|f|父亲 72 岁，住在老家南通
father.bp|f|父亲有高血压，每天早上吃一片氨氯地平
car.a|f|在看两台车，理想 L6 落地 26 万
car.b|f|另一台看的是问界 M7，落地大概 28.5 万
run|f|每天早上 6 点在滨江跑 5 公里
knee|f|右膝半月板有旧伤，跑量每周不能超过 30 公里
coffee|p|喜欢手冲，偏爱埃塞俄比亚的豆子
shrimp|f|对虾过敏
meeting|f|每周一上午 10 点开组内周会
intern|f|带的实习生叫小蒋，下个月转正答辩
intern.weak|f|实习生排版不错，但讲方案时很紧张，表达偏弱
vinyl|f|收藏黑胶唱片，最近入了一张坂本龙一的《async》
vinyl2|f|上个月淘到罗大佑《之乎者也》的首版
game|f|周末偶尔打《黑神话：悟空》，卡在第三回
game2|f|手机上每天玩几局《王者荣耀》，只玩辅助
pitch|f|每周三下午固定去客户那边提案
home|f|住在滨江边的公寓，离公司骑车 15 分钟
""",
            },
            {
                "id": "shen",
                "name": "沈佳怡",
                "nick": "佳怡",
                "memories": """
nick|i|叫她佳怡
emoji|p|喜欢回复里带点颜文字
job|f|在青禾设计做文案策划，入职两年
cat|f|养了一只橘猫叫年糕，3 岁，是只公猫
cat.food|f|猫只吃无谷的冻干，换粮会吐
cat.kidney|f|猫去年查出肾指标偏高，要多喝水
roommate|f|室友小雨是大学同学，一起在静安合租
roommate.night|f|室友是护士，经常上夜班，白天在家睡觉
bf|f|男朋友叫阿哲，在杭州工作，异地恋
bf.train|f|男朋友每两周的周末坐高铁来上海一次
mom|f|妈妈在成都开一家小火锅店
mom.sugar|f|妈妈有糖尿病，要控糖
book1|f|《三体》看完了，太震撼了
book2|f|刚开始看《置身事内》，讲地方政府和经济的
book3|f|《我与地坛》重读了第三遍，还是会哭
podcast|f|通勤时听播客《忽左忽右》
spicy|p|无辣不欢，但最近胃不好
stomach|f|上个月查出慢性胃炎，医生让少吃辣少喝咖啡
rent|f|每月房租 4200，和室友平摊
salary|f|税后工资大概 1 万 2
fund|f|每月定投 2000 块指数基金
course|f|在报班学日语，准备考 N2
exam|f|日语 N2 考试在 7 月 6 日
japan|f|计划 10 月去京都旅行
plant|f|阳台上养了一盆龟背竹和两盆多肉
""",
            },
            {
                "id": "qiu",
                "name": "邱志强",
                "nick": "阿强",
                "memories": """
nick|i|叫他阿强
lang|i|回复用中文，数字用阿拉伯数字
job|f|青禾设计的客户经理，负责快消品牌
gym.a|f|公司楼下的健身房年卡 3600 元
gym.b|f|小区旁边的乐刻按月付，每月 199
phone.a|f|想换手机，看中 iPhone 16 Pro，官网 7999
phone.b|f|也在考虑小米 15 Pro，京东价 5299
flight|f|下周三去深圳见客户，订了早上 8 点的航班
client|f|深圳的客户是鲜果时光，老板是黄总
client.tea|f|鲜果时光的老板不喝酒，爱喝普洱
gf|f|女朋友叫苏苏，是幼儿园老师
gf.parents|f|下个月要第一次去女朋友家见父母
gf.veg|f|女朋友吃素，连鸡蛋都不吃
mortgage|f|房贷每月还 8600，还剩 23 年
carloan|f|车贷每月 2100，明年 3 月还清
card|f|有两张信用卡，招行的账单日是每月 5 号
card2|f|另一张中信卡账单日是每月 20 号
diet|f|在减脂，晚饭不吃主食
weight|f|目标是年底前从 86 公斤减到 78 公斤
tea|p|喜欢喝无糖乌龙茶
brother|f|弟弟邱志远在读研，学计算机
brother.laptop|f|弟弟想要一台能跑深度学习的笔记本，预算一万
hometown|f|老家在江西赣州
dad|f|父母在老家，爸爸退休前是中学数学老师
insure|f|给父母各买了一份百万医疗险，每年 9 月续保
movie|f|上周末看了《封神第二部》，特效一般
movie2|f|在家重温了《让子弹飞》，还是经典
""",
            },
            {
                "id": "hemin",
                "name": "何敏",
                "nick": "Amy",
                "memories": """
nick|i|叫她 Amy 就行
lang|i|中英混着说没关系，专有名词保留英文
job|f|青禾设计的项目经理，同时跟 5 个项目
mom|f|妈妈 65 岁，去年做了心脏支架手术
mom.meds|f|妈妈每天要吃阿司匹林和他汀，不能断
aunt|f|保姆王阿姨每周一三五来家里打扫
aunt.key|f|保姆手里有一把家门备用钥匙
mentor|f|以前的领导 Vivian 现在在字节做设计总监
mentor.ref|f|要是跳槽，前领导答应给写推荐信
proj.a|f|山泉记包装改版项目 6 月 27 日交付
proj.b|f|鲜果时光品牌升级项目 7 月 15 日交付
proj.c|f|安心保官网改版 8 月底上线
standup|f|每天早上 9:30 开站会
trip|f|每个月要去一次北京出差
aisle|p|出差只坐靠过道的座位
son|f|儿子叫豆豆，两岁半，在上托班
son.milk|f|儿子对牛奶蛋白过敏，只喝水解奶粉
husband|f|老公 Kevin 是外企工程师，周末常加班
sleep|f|晚上 12 点后才睡，经常失眠
melatonin|f|吃褪黑素没用，医生建议睡前少看手机
pilates|f|每周六早上上普拉提私教课
taxi|f|还没买车，出门都打车
budget|f|这个月团队建设预算还剩 3000
outing|f|团建想去莫干山，还在比较民宿
inn.a|f|莫干山有家民宿叫裸心谷，一晚 2800
inn.b|f|另一家云溪民宿一晚 1200，含早餐
show|f|《黑镜》第七季看到第三集了
show2|f|刚刷完《漫长的季节》，神剧
""",
            },
        ],
    },
]

QUESTIONS = """
zhouxw|assoc|daughter,mango|朵朵有什么忌口吗？明天带她去同学家参加生日会
zhouxw|assoc|son,myopia|小航上课老眯着看黑板，要不要带他去医院查一查
zhouxw|assoc,chatty|husband,husband.cat|周末想去朋友家玩，她家养了两只布偶，陆川去合适吗😂
zhouxw|assoc|client.contact,deadline|刘总那边的东西最晚哪天给来着
zhouxw|set|daughter,son|考你一下，我家一共几个孩子？分别多大了
zhouxw|set,chatty|mango,husband.cat,lactose|家里请了个新阿姨，我想给她列个清单：我们家谁对什么过敏、什么东西碰不得
zhouxw|category|book,book2|最近我读过哪些书？想写个读书笔记发朋友圈
zhouxw|category|drama,movie|最近看过什么电影或者剧？同事让我推荐几部
zhouxw|paraphrase|commute,home|早上从家出门到单位大概得多长时间
peng|assoc|dog,dog.leg|可乐最近走路一瘸一拐的，周末还能带它去登山吗
peng|assoc|dog,dog.vet|可乐下一针该啥时候去？
peng|assoc|wife,wife.gift|帮我挑个礼物给林静，她会中意什么
peng|assoc|intern,intern.weak|小蒋转正答辩我该重点提醒他什么
peng|set|car.a,car.b|我现在在看的那两台车，哪台更便宜？差多少
peng|set,chatty|run,meeting,pitch|下周想抽一个完整的上午去看展，我一周的固定安排都有啥，帮我找找空
peng|category|game,game2|我最近在玩什么游戏来着
peng|category|vinyl,vinyl2|最近在听什么音乐？推荐两张给同事
peng|paraphrase|knee,run|最近想加大训练量，我的老伤扛得住吗
peng|hub|dog,dog.vet|可乐 9 月打疫苗，要提前预约吗
shen|assoc|cat,cat.food,cat.kidney|年糕最近老不爱动，想给它调整下伙食，有啥讲究
shen|assoc|roommate,roommate.night|小雨明早能帮我开门不？修空调师傅十点到
shen|assoc|bf,bf.train|阿哲下回什么时候到？我好安排
shen|set|rent,fund|我现在每个月固定要花出去多少钱
shen|set|cat,plant|帮我数数我家现在养了些啥，出差前要托人照顾
shen|category|book1,book2,book3|我最近读了什么书
shen|paraphrase,chatty|spicy,stomach|同事约我下班去吃火锅，可我最近肚子一直不太舒服，能去吗
qiu|assoc|client,client.tea|见黄总带点什么伴手礼比较好
qiu|assoc|gf,gf.veg|周末请苏苏撮一顿，选哪家馆子
qiu|assoc|brother,brother.laptop|给志远选个电脑，你推荐几款
qiu|set|gym.a,gym.b|健身房哪个更便宜
qiu|set|phone.a,phone.b|手机哪个更划算？
qiu|set|mortgage,carloan|我每个月还款一共多少
qiu|set|card,card2|两张信用卡的账单日分别是哪天
qiu|category|movie,movie2|我最近看过什么电影
qiu|paraphrase|diet,weight|我现在离目标体重还差多少，晚上能吃米饭吗
hemin|assoc|aunt,aunt.key|我被锁在外面了，王阿姨能救急不
hemin|assoc,weak|mentor,mentor.ref|想约 Vivian 出来坐坐，她那边能不能帮衬一下
hemin|assoc|son,son.milk|豆豆的口粮要囤点了，帮我看看买哪种
hemin|set|inn.a,inn.b|民宿哪个更便宜
hemin|set,mixed|proj.a,proj.b,proj.c|我手上这几个 project 哪个最先交付
hemin|category|show,show2|最近追了哪些剧
hemin|paraphrase|sleep,melatonin|晚上老是睡不着，有什么办法
"""

NEGATIVES = """
g5|zhouxw|早上好呀
g5|peng|收到
g5|shen|今天楼下咖啡店买一送一，冲啊
g5|qiu|哈哈哈哈哈
g5|hemin|Good morning~
"""


def _times(rng: random.Random) -> tuple[int, int]:
    created = NOW - rng.randint(3 * 86400, 300 * 86400)
    if rng.random() < 0.25:
        updated = created + rng.randint(86400, max(86400, (NOW - created) - 86400))
    else:
        updated = created
    return created, min(updated, NOW - 3600)


def build() -> dict:
    rng = random.Random(21)

    def memory(owner: str, line: str, group_memory: bool) -> dict:
        parts = line.split("|")
        key, t, content = parts[0], parts[1], parts[2]
        created, updated = _times(rng)
        out = {"id": f"{owner}.{key}", "type": TYPES[t], "content": content, "created_at": created,
               "updated_at": updated}
        if group_memory:
            out["added_by"] = parts[3]
        return out

    groups = []
    member_group: dict[str, str] = {}
    for g in GROUPS:
        members = []
        for m in g["members"]:
            member_group[m["id"]] = g["id"]
            lines = [x for x in m["memories"].strip().splitlines() if x.strip()]
            members.append({"id": m["id"], "name": m["name"], "nick": m["nick"],
                            "memories": [memory(m["id"], x, False) for x in lines]})
        lines = [x for x in g["memories"].strip().splitlines() if x.strip()]
        groups.append({"id": g["id"], "name": g["name"], "platform": g["platform"],
                       "memories": [memory(g["id"], x, True) for x in lines], "members": members})
    questions = []
    for i, line in enumerate(x for x in QUESTIONS.strip().splitlines() if x.strip()):
        speaker, tags, gold, text = line.split("|", 3)
        group = member_group[speaker]
        ids = [f"{group}.{k[2:]}" if k.startswith("g:") else f"{speaker}.{k}" for k in gold.split(",")]
        questions.append({"id": f"a{i + 1:03d}", "group": group, "speaker": speaker, "text": text, "gold": ids,
                          "tags": tags.split(",")})
    negatives = []
    for i, line in enumerate(x for x in NEGATIVES.strip().splitlines() if x.strip()):
        group, speaker, text = line.split("|", 2)
        negatives.append({"id": f"an{i + 1:03d}", "group": group, "speaker": speaker, "text": text})
    return {
        "description": (
            "Issue 21's extension of the Chinese personal-assistant set: new groups and members (20-30 memories "
            "each) tied by names, aliases and relations, with hand-written associative (assoc), set, category and "
            "paraphrase questions, and direct questions over hub entities (hub). Written by "
            "bench/zh_assistant_assoc_src.py; format: see bench/zh_assistant.py."
        ),
        "now": NOW,
        "now_iso": "2025-06-16T10:00:00+08:00",
        "groups": groups,
        "questions": questions,
        "negatives": negatives,
    }


def write(data: dict, path: Path = OUT) -> None:
    """One memory / question per line, as zh_assistant.json."""
    dump = lambda x: json.dumps(x, ensure_ascii=False)  # noqa: E731
    out = ["{", f' "description": {dump(data["description"])},', f' "now": {data["now"]},',
           f' "now_iso": {dump(data["now_iso"])},', ' "groups": [']
    for gi, g in enumerate(data["groups"]):
        out.append(f'  {{"id": {dump(g["id"])}, "name": {dump(g["name"])}, "platform": {dump(g["platform"])},')
        out.append('   "memories": [')
        out += [f"    {dump(m)}" + ("," if i < len(g["memories"]) - 1 else "") for i, m in enumerate(g["memories"])]
        out.append("   ],")
        out.append('   "members": [')
        for mi, m in enumerate(g["members"]):
            out.append(f'    {{"id": {dump(m["id"])}, "name": {dump(m["name"])}, "nick": {dump(m["nick"])}, "memories": [')
            out += [f"     {dump(x)}" + ("," if i < len(m["memories"]) - 1 else "") for i, x in enumerate(m["memories"])]
            out.append("    ]}" + ("," if mi < len(g["members"]) - 1 else ""))
        out.append("   ]}" + ("," if gi < len(data["groups"]) - 1 else ""))
    out.append(" ],")
    for key in ("questions", "negatives"):
        out.append(f' "{key}": [')
        out += [f"  {dump(q)}" + ("," if i < len(data[key]) - 1 else "") for i, q in enumerate(data[key])]
        out.append(" ]" + ("," if key == "questions" else ""))
    out.append("}")
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write(build())
    print(f"wrote {OUT}")

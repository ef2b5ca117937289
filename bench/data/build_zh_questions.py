"""Writes bench/data/zh_multi.json and bench/data/zh_crosslingual.json (issue 33): hand-written questions over the
members and memories of the personal-assistant sets (zh_assistant.json and zh_assistant_assoc.json), by reference.

Nothing here is generated: each row is (speaker, group, message, gold memory ids, tags). This script only lays
them out, numbered, in the zh_assistant question format; bench/zh_conversation.py loads and checks them.

    .venv/bin/python bench/data/build_zh_questions.py

zh_multi tags: `two` (two questions in one message), `chatty` (the question sits inside chit-chat), `hop` (an
answer memory shares no index term with the message and is reached through a bridge memory the message names:
家乡 → 父亲 → 病; checked like zh_assistant's `assoc`).
zh_crosslingual tags: `en` (an English question over Chinese memories), `synonym` (a Chinese paraphrase that
shares no CJK bigram, Latin word or kin / pet character with any gold memory).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = ["zh_assistant.json", "zh_assistant_assoc.json"]

MULTI = [
    # 老王 (g1)
    (
        "wang",
        "g1",
        "老王这周好累啊😮‍💨 对了问两个事：我儿子游泳课是周几？还有我约的牙医是哪天？",
        ["wang.son.swim", "wang.dentist"],
        ["two", "chatty"],
    ),
    ("wang", "g1", "青岛那趟旅行是几月份来着？另外我那辆车是哪年的？", ["wang.qingdao", "wang.car"], ["two"]),
    (
        "wang",
        "g1",
        "刚开完会腰都要断了……不好意思，我真正想问的是：我这个腰的毛病，坐多久就会疼？另外晚上几点以后别给我发消息？",
        ["wang.back", "wang.latenight"],
        ["two", "chatty"],
    ),
    (
        "wang",
        "g1",
        "组里服务器预算还剩多少？另外我答应过组里请客是什么时候？",
        ["wang.budget", "wang.teamdinner"],
        ["two"],
    ),
    (
        "wang",
        "g1",
        "唉面试完两个候选人，嗓子都哑了。话说回来，团建那天大巴几点出发？另外发版窗口是哪几天？",
        ["g1.offsite", "g1.release"],
        ["two", "chatty"],
    ),
    ("wang", "g1", "绍兴那边我多久回去一次？另外我手机啥型号？", ["wang.parents", "wang.phone"], ["two"]),
    # 小林 (g1)
    (
        "lin",
        "g1",
        "小林今天修 bug 修到吐血。我想问：我对什么水果过敏？还有收银台改版哪天提测？",
        ["lin.mango", "lin.deadline"],
        ["two", "chatty"],
    ),
    ("lin", "g1", "我妈什么时候来杭州？另外 PMP 考试是几月？", ["lin.mom", "lin.pmp"], ["two"]),
    ("lin", "g1", "国庆那趟出国游签证办了没？还有我吃素这件事，鸡蛋能吃吗？", ["lin.kyoto", "lin.veg"], ["two"]),
    (
        "lin",
        "g1",
        "猫又把键盘踩了一通哈哈。说正事：我的猫都叫什么名字？还有我打算年底干嘛来着？",
        ["lin.cats", "lin.jobchange"],
        ["two", "chatty"],
    ),
    # 张阿姨 (g2)
    (
        "zhang",
        "g2",
        "张阿姨我今天腿又疼了，唉人老了。我想问问：乐乐几点午睡？还有我每个月几号去开降压药？",
        ["zhang.lele.nap", "zhang.clinic"],
        ["two", "chatty"],
    ),
    (
        "zhang",
        "g2",
        "外孙身上那个湿疹，洗澡要注意啥？另外医保啥时候交？",
        ["zhang.lele.eczema", "zhang.insurance"],
        ["two"],
    ),
    ("zhang", "g2", "我家住几楼来着，有电梯没？顺便问下我的老花镜多少度", ["zhang.building", "zhang.glasses"], ["two"]),
    (
        "zhang",
        "g2",
        "哎呀今天广场舞跳得可开心了，音响差点没电。我想问问：我那个降压药叫什么名字？还有医生说我血糖怎么样？",
        ["zhang.bp", "zhang.sweet"],
        ["two", "chatty"],
    ),
    (
        "zhang",
        "g2",
        "我闺女啥时候下班？她家那个小的作息是怎样的？",
        ["zhang.daughter", "zhang.grandson", "zhang.lele.nap"],
        ["two", "hop"],
    ),
    # 刘哥 (g2)
    (
        "liu",
        "g2",
        "刘哥跑了一天车累死了哈哈。不好意思，我真正想问的是：那个家乡是山东济南的人，他妈妈有什么病？另外我驾照什么时候换证？",
        ["liu.hometown", "liu.mom", "liu.license"],
        ["two", "chatty"],
    ),
    ("liu", "g2", "旺财的疫苗哪天到期？还有我儿子的补习班一节课多少钱？", ["liu.dog.vaccine", "liu.tutor"], ["two"]),
    ("liu", "g2", "我车位号多少？附近哪里能充电？", ["liu.spot", "liu.charging"], ["two"]),
    (
        "liu",
        "g2",
        "今天跑了十二个小时，腰都直不起来了。不好意思问一下：我这个腰是什么毛病？另外戒烟多久了？",
        ["liu.back", "liu.smoke"],
        ["two", "chatty"],
    ),
    # 雷子 (g3)
    (
        "lei",
        "g3",
        "雷子我最近脚还没好利索，唉。问你俩事：我那台无人机什么型号？还有包车一直找谁？",
        ["lei.drone", "lei.bus"],
        ["two", "chatty"],
    ),
    ("lei", "g3", "EBC 计划是什么时候？另外急救包里还缺什么？", ["lei.plan.ebc", "lei.firstaid"], ["two"]),
    ("lei", "g3", "九溪那次有多少新人报名，集合时间几点？", ["lei.new", "g3.next"], ["two"]),
    ("lei", "g3", "露营那次限多少人，在哪？顺便问下我的帐篷能借给新人吗", ["g3.camp", "lei.tent"], ["two"]),
    # 思远 (g4)
    (
        "chen",
        "g4",
        "思远刷题刷到头秃😭 不好意思，真正想问的是：我上次模拟考 408 多少分？另外毕业论文哪天答辩？",
        ["chen.mock.score", "chen.thesis"],
        ["two", "chatty"],
    ),
    ("chen", "g4", "我数学用的哪几本书？还有报班预算最多多少？", ["chen.books", "chen.budget"], ["two"]),
    ("chen", "g4", "毕业典礼是哪天，爸妈会来吗？另外 7 月 1 日以后我住哪？", ["chen.graduation", "chen.rent"], ["two"]),
    (
        "chen",
        "g4",
        "今天又是被线代虐的一天😩 说正经的，我政治打算什么时候开始，跟谁？另外每周哪几天去健身房？",
        ["chen.politics", "chen.gym"],
        ["two", "chatty"],
    ),
    ("chen", "g4", "模拟考每周几点开始？资料放在哪里？", ["g4.mock", "g4.files"], ["two"]),
    ("chen", "g4", "我笔记本电脑是什么型号，笔记用什么做？", ["chen.laptop", "chen.notes"], ["two"]),
    # 晓雯 (g5)
    (
        "zhouxw",
        "g5",
        "哎呀今天累死了，烦😩 不好意思，我真正想问的是：刘总那边最晚哪天要？另外女儿的钢琴课是周几上？",
        ["zhouxw.client.contact", "zhouxw.deadline", "zhouxw.piano"],
        ["two", "chatty", "hop"],
    ),
    ("zhouxw", "g5", "老公对什么过敏？还有儿子近视多少度？", ["zhouxw.husband.cat", "zhouxw.myopia"], ["two"]),
    (
        "zhouxw",
        "g5",
        "陆川能跟我去朋友家吗？她家有两只布偶。另外我周几去游泳来着",
        ["zhouxw.husband", "zhouxw.husband.cat", "zhouxw.swim"],
        ["two", "hop"],
    ),
    (
        "zhouxw",
        "g5",
        "婆婆膝盖怎么了？顺便说下我乳糖不耐受能不能喝拿铁",
        ["zhouxw.mil.knee", "zhouxw.lactose", "zhouxw.coffee"],
        ["two"],
    ),
    (
        "zhouxw",
        "g5",
        "我最近读过哪些书？另外结婚纪念日是几号",
        ["zhouxw.book", "zhouxw.book2", "zhouxw.anniv"],
        ["two"],
    ),
    # 彭哥 (g5)
    (
        "peng",
        "g5",
        "最近忙得脚不沾地。不好意思，我真正想问的是：南通老家那位身体方面有啥要注意的？另外可乐的疫苗几月打？",
        ["peng.father", "peng.father.bp", "peng.dog.vet"],
        ["two", "chatty", "hop"],
    ),
    (
        "peng",
        "g5",
        "理想和问界哪个便宜？另外周三下午我一般在干嘛？",
        ["peng.car.a", "peng.car.b", "peng.pitch"],
        ["two"],
    ),
    (
        "peng",
        "g5",
        "林静生日是哪天？送她点什么好？顺便问下周会几点开",
        ["peng.wife", "peng.wife.gift", "peng.meeting"],
        ["two"],
    ),
    (
        "peng",
        "g5",
        "小蒋那个弱点是什么？另外我膝盖每周跑量上限多少？",
        ["peng.intern", "peng.intern.weak", "peng.knee"],
        ["two"],
    ),
    (
        "peng",
        "g5",
        "周末终于把黑神话第三回打过了！！对了问一下，我收藏的黑胶最近入了哪张？另外我对什么过敏",
        ["peng.vinyl", "peng.shrimp"],
        ["two", "chatty"],
    ),
    # 阿强 (g5)
    (
        "qiu",
        "g5",
        "见面前想问下：苏苏有什么忌口吗？另外下周去深圳几点的飞机？",
        ["qiu.gf", "qiu.gf.veg", "qiu.flight"],
        ["two", "hop"],
    ),
    (
        "qiu",
        "g5",
        "鲜果时光的老板爱喝什么？两张信用卡账单日分别是几号？",
        ["qiu.client.tea", "qiu.card", "qiu.card2"],
        ["two"],
    ),
    (
        "qiu",
        "g5",
        "黄总那边送什么茶合适？另外我车贷哪年还清",
        ["qiu.client", "qiu.client.tea", "qiu.carloan"],
        ["two", "hop"],
    ),
    ("qiu", "g5", "两个健身房哪个便宜？另外我减重目标是多少", ["qiu.gym.a", "qiu.gym.b", "qiu.weight"], ["two"]),
    # 糖糖 (g6)
    (
        "tang",
        "g6",
        "周末在家躺平🛋️ 我想问下：梦瑶做哪行的？另外我演唱会门票是哪天的？",
        ["tang.mengyao", "tang.classmate.job", "tang.concert"],
        ["two", "chatty", "hop"],
    ),
    (
        "tang",
        "g6",
        "岳母来了吃饭要注意什么？另外老婆哪几天值班？",
        ["tang.mil", "tang.mil.diet", "tang.wife.shift"],
        ["two"],
    ),
    ("tang", "g6", "同学聚会在哪儿办？我爸那个病能不能长途坐车？", ["tang.reunion", "tang.dad.heart"], ["two"]),
    ("tang", "g6", "煤球吃的什么猫粮？另外我下雨天怎么上班", ["tang.cat.food", "tang.rain"], ["two"]),
    (
        "tang",
        "g6",
        "今天骑车上班差点被雨淋了哈哈。不好意思我真正想问的是：妹妹暑假想干嘛？另外我手机是哪款",
        ["tang.sister.intern", "tang.phone"],
        ["two", "chatty"],
    ),
    # 宋姐 (g6)
    (
        "song",
        "g6",
        "宋姐我今天对账对到眼花😵 不好意思，我真正想问的是：那个老家在绍兴的人，身体怎么样了？另外哥哥借的钱说什么时候还？",
        ["song.dad", "song.dad.stroke", "song.debt"],
        ["two", "chatty", "hop"],
    ),
    (
        "song",
        "g6",
        "甜甜的药叫什么？轩轩期末考哪天？",
        ["song.kid2", "song.kid2.asthma", "song.kid1", "song.kid1.exam"],
        ["two", "hop"],
    ),
    (
        "song",
        "g6",
        "家教一次多少钱，什么时候上课？另外车险哪天到期",
        ["song.tutor", "song.tutor.fee", "song.car.ins"],
        ["two"],
    ),
    ("song", "g6", "发财树叶子黄了怎么办？另外我牙医约的是哪天？", ["song.plant2", "song.dental"], ["two"]),
    ("song", "g6", "小女儿看什么动画片？老周一般几点回家？", ["song.show2", "song.husband"], ["two"]),
    (
        "song",
        "g6",
        "今天财务结账结到手软，办公室的话梅都吃光了。我想问：班费还剩多少？另外聚餐是每月哪天？",
        ["g6.kitty", "g6.dinner"],
        ["two", "chatty"],
    ),
    # 老高 (g6)
    (
        "gao",
        "g6",
        "老高我刚跑完间歇，腿软😂 想问下：那两双跑鞋哪双便宜？另外女儿生活费每月几号转？",
        ["gao.shoe.a", "gao.shoe.b", "gao.daughter.money"],
        ["two", "chatty"],
    ),
    ("gao", "g6", "这个月聚餐轮到谁订？那两家餐厅人均多少？", ["gao.dinner.turn", "gao.rest.a", "gao.rest.b"], ["two"]),
    ("gao", "g6", "妈妈那边我每周什么时候打电话？另外马拉松目标多少？", ["gao.mom.call", "gao.marathon"], ["two"]),
    ("gao", "g6", "我跟腱那个伤有什么禁忌？另外教练哪天带间歇", ["gao.achilles", "gao.coach"], ["two"]),
    (
        "gao",
        "g6",
        "李红最近作息怎么样？另外我每年清明回哪儿",
        ["gao.wife", "gao.wife.night", "gao.hometown"],
        ["two", "hop"],
    ),
    # single questions wrapped in chit-chat
    (
        "wang",
        "g1",
        "今天又被产品经理拉去开了三个小时的会，出来天都黑了，饭也没吃上，回家路上电动车还没电了，推了半天。不好意思，我真正想问的是：我儿子对什么过敏来着？",
        ["wang.son", "wang.pollen"],
        ["chatty"],
    ),
    (
        "liu",
        "g2",
        "哈哈今天拉到一个老乡，聊了一路泰山队，差点忘了打表。对了，旺财打针那事哪天到期来着？",
        ["liu.dog", "liu.dog.vaccine"],
        ["chatty"],
    ),
    (
        "chen",
        "g4",
        "室友今晚又在打游戏，吵得我根本背不进去单词，耳机也没电了，真的崩溃。算了，说正事：我 408 里最搞不懂的是哪块？",
        ["chen.os", "chen.mock.score"],
        ["chatty"],
    ),
    (
        "peng",
        "g5",
        "昨天带组里的人去吃了顿烧烤，喝到一点多，今天头还疼。说回来，小蒋转正答辩我该提醒他注意什么？",
        ["peng.intern", "peng.intern.weak"],
        ["chatty"],
    ),
    (
        "song",
        "g6",
        "最近公司在做年中审计，天天对着报表眼睛都花了，回家还要辅导作业。我真正想问的是：轩轩的家教是每周几上课，一次多少钱？",
        ["song.tutor", "song.tutor.fee"],
        ["chatty"],
    ),
]

EN = [
    ("wang", "g1", "When is my son's swimming class?", ["wang.son.swim"]),
    ("wang", "g1", "Which database do I prefer?", ["wang.pg"]),
    ("wang", "g1", "When is the reconciliation system supposed to go live?", ["wang.recon"]),
    ("wang", "g1", "What is wrong with my back?", ["wang.back"]),
    ("wang", "g1", "Where do my parents live?", ["wang.parents"]),
    ("zhang", "g2", "What time does my grandson take his nap?", ["zhang.lele.nap"]),
    ("zhang", "g2", "Which floor do I live on, and is there a lift?", ["zhang.building"]),
    ("zhang", "g2", "What medicine do I take for my blood pressure?", ["zhang.bp"]),
    ("zhang", "g2", "Did I lose something recently?", ["zhang.umbrella"]),
    ("zhang", "g2", "Which kind of Chinese opera do I like?", ["zhang.opera"]),
    ("liu", "g2", "When does the dog's rabies shot expire?", ["liu.dog.vaccine"]),
    ("liu", "g2", "How much is my monthly mortgage payment?", ["liu.loan"]),
    ("liu", "g2", "Where do I usually charge my car?", ["liu.charging"]),
    ("lei", "g3", "What drone do I have?", ["lei.drone"]),
    ("lei", "g3", "Which ankle did I hurt?", ["lei.ankle"]),
    ("lei", "g3", "When is the Everest Base Camp trek planned?", ["lei.plan.ebc"]),
    ("chen", "g4", "When is my thesis defense?", ["chen.thesis"]),
    ("chen", "g4", "What did I score on last week's mock exam?", ["chen.mock.score"]),
    ("chen", "g4", "Where is my hometown?", ["chen.hometown"]),
    ("chen", "g4", "Which days do I go to the gym?", ["chen.gym"]),
    ("lin", "g1", "What fruit am I allergic to?", ["lin.mango"]),
    ("lin", "g1", "What are my cats called?", ["lin.cats"]),
    ("lin", "g1", "When is my mom coming to Hangzhou?", ["lin.mom"]),
    ("zhouxw", "g5", "What is my daughter allergic to?", ["zhouxw.mango"]),
    ("zhouxw", "g5", "Who is my contact at the mineral water client?", ["zhouxw.client.contact", "zhouxw.client"]),
    ("zhouxw", "g5", "How long is my commute?", ["zhouxw.commute"]),
    ("peng", "g5", "What breed is my dog and how old is it?", ["peng.dog"]),
    ("peng", "g5", "What would my wife like as a birthday gift?", ["peng.wife.gift"]),
    ("peng", "g5", "How far can I run per week with my knee?", ["peng.knee"]),
    ("qiu", "g5", "What flight did I book for Shenzhen?", ["qiu.flight"]),
    ("qiu", "g5", "When are my credit card statement dates?", ["qiu.card", "qiu.card2"]),
    ("qiu", "g5", "What is my weight loss goal?", ["qiu.weight"]),
    ("tang", "g6", "What is my cat's name?", ["tang.cat"]),
    ("tang", "g6", "When is the Jay Chou concert?", ["tang.concert"]),
    ("tang", "g6", "What does my mother-in-law not eat?", ["tang.mil.diet"]),
    ("song", "g6", "When does my son's math tutor come, and how much per lesson?", ["song.tutor", "song.tutor.fee"]),
    ("song", "g6", "What inhaler does my younger daughter carry?", ["song.kid2.asthma"]),
    ("song", "g6", "When does my car insurance expire?", ["song.car.ins"]),
    ("gao", "g6", "What is my half marathon personal best?", ["gao.pb"]),
    ("gao", "g6", "Which running shoes am I comparing?", ["gao.shoe.a", "gao.shoe.b"]),
    ("gao", "g6", "How much money does my daughter get each month?", ["gao.daughter.money"]),
    ("gao", "g6", "When do I video call my mom?", ["gao.mom.call"]),
]

SYNONYM = [
    ("wang", "g1", "小朋友暑期学凫水是哪几天？", ["wang.son.swim"]),
    ("wang", "g1", "我的座驾是哪个牌子？", ["wang.car"]),
    ("wang", "g1", "我脊椎那块的老毛病是什么情况？", ["wang.back"]),
    ("wang", "g1", "我平常饮品只碰什么？", ["wang.tea"]),
    ("zhang", "g2", "我每日晨起服用的药片叫啥名字", ["zhang.bp"]),
    ("zhang", "g2", "我家外孙皮肤上那个毛病，给他冲凉要注意啥", ["zhang.lele.eczema"]),
    ("zhang", "g2", "我用的电话是啥品牌", ["zhang.phone"]),
    ("lei", "g3", "我那台会飞的拍照设备是什么型号", ["lei.drone"]),
    ("lei", "g3", "我左边脚脖子的伤现在咋样", ["lei.ankle"]),
    ("lei", "g3", "咱们出行租大巴一般联系哪位司机", ["lei.bus"]),
    ("chen", "g4", "我哪门课最拿手", ["chen.ds"]),
    ("chen", "g4", "我平时记课堂要点用什么应用", ["chen.notes"]),
    ("chen", "g4", "我入夜难以入眠是什么原因", ["chen.insomnia"]),
    ("lin", "g1", "我忌口哪些荤菜", ["lin.veg"]),
    ("lin", "g1", "我的电脑是什么配置", ["lin.mac"]),
    ("lin", "g1", "我和对象多长时间能相聚", ["lin.bf"]),
    ("zhouxw", "g5", "我家闺女碰不得哪种水果", ["zhouxw.mango"]),
    ("zhouxw", "g5", "我另一半做什么营生", ["zhouxw.husband"]),
    ("zhouxw", "g5", "我自驾去单位要多久", ["zhouxw.commute"]),
    ("zhouxw", "g5", "我能不能碰乳制品", ["zhouxw.lactose"]),
    ("peng", "g5", "我那只汪的腿脚有什么要注意的", ["peng.dog.leg"]),
    ("peng", "g5", "我老爷子有什么慢性病", ["peng.father.bp"]),
    ("peng", "g5", "哪种水产我碰不得", ["peng.shrimp"]),
    ("qiu", "g5", "我对象有什么饮食禁忌", ["qiu.gf.veg"]),
    ("qiu", "g5", "家里最小的那个念的什么方向", ["qiu.brother"]),
    ("qiu", "g5", "我想瘦到多少斤", ["qiu.weight"]),
    ("tang", "g6", "我的喵主子叫啥", ["tang.cat"]),
    ("tang", "g6", "我通勤靠什么两个轮子的", ["tang.bike"]),
    ("tang", "g6", "我哪种调料不碰", ["tang.coriander"]),
    ("tang", "g6", "我父亲心脏方面有什么毛病", ["tang.dad.heart"]),
    ("song", "g6", "老大每天清晨得几点进校门", ["song.school"]),
    ("song", "g6", "我家老二喘不上气那个病要带什么药", ["song.kid2.asthma"]),
    ("song", "g6", "我兄长借走的款子多少", ["song.debt"]),
    ("gao", "g6", "我那块运动腕表是什么型号", ["gao.watch"]),
    ("gao", "g6", "我脚后跟那根筋的伤有什么讲究", ["gao.achilles"]),
    ("gao", "g6", "我家那位在哪里上班", ["gao.wife"]),
    ("gao", "g6", "我爱喝哪种酒", ["gao.wine"]),
    ("liu", "g2", "我那条大狗叫什么", ["liu.dog"]),
    ("liu", "g2", "我的驾驶证什么时候更新", ["liu.license"]),
    ("liu", "g2", "我戒香烟多久了", ["liu.smoke"]),
    ("liu", "g2", "孩子课后加课要花多少钱", ["liu.tutor"]),
]


def _questions(prefix: str, rows: list[tuple]) -> list[dict]:
    out = []
    for i, row in enumerate(rows, 1):
        speaker, group, text, gold, *rest = row
        tags = rest[0] if rest else []
        out.append(
            {"id": f"{prefix}{i:03d}", "group": group, "speaker": speaker, "text": text, "gold": gold, "tags": tags}
        )
    return out


def main() -> None:
    multi = {
        "description": (
            "Issue 33: two questions in one message, a question wrapped in chit-chat, and two-hop links, over the "
            "members and memories of the sources (by reference). Written by bench/data/build_zh_questions.py; "
            "format and checks: bench/zh_conversation.py."
        ),
        "sources": SOURCES,
        "questions": _questions("m", MULTI),
    }
    cross = {
        "description": (
            "Issue 33: English questions over Chinese memories (tag en) and Chinese paraphrases sharing no key word "
            "with the answer (tag synonym), over the members and memories of the sources (by reference). Written by "
            "bench/data/build_zh_questions.py; format and checks: bench/zh_conversation.py."
        ),
        "sources": SOURCES,
        "questions": _questions("e", [(*r, ["en"]) for r in EN])
        + _questions("s", [(*r, ["synonym"]) for r in SYNONYM]),
    }
    for name, doc in (("zh_multi.json", multi), ("zh_crosslingual.json", cross)):
        lines = ",\n  ".join(json.dumps(q, ensure_ascii=False) for q in doc["questions"])
        head = json.dumps({k: v for k, v in doc.items() if k != "questions"}, ensure_ascii=False, indent=1)[:-2]
        (HERE / name).write_text(f'{head},\n "questions": [\n  {lines}\n ]\n}}\n', encoding="utf-8")
        print(f"wrote {name}: {len(doc['questions'])} questions")


if __name__ == "__main__":
    main()

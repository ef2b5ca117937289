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
swim|f|每周日上午去游泳馆游 1000 米
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
podcast2|f|睡前会放一期《故事FM》助眠
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
drink2|f|办公室常备元气森林气泡水
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
    {
        "id": "g6",
        "name": "老同学·吃喝玩乐群",
        "platform": "aiocqhttp",
        "memories": """
tone|i|群里聊天别太正经，回复口语化一点|tang
dinner|f|每月最后一个周六聚餐，轮流订餐厅|gao
kitty|f|群里有笔班费，现在余额 1860 元，宋雅琴管账|song
ktv|f|常去的 KTV 是五角场的麦乐迪|xunuo
nolink|i|别在群里发拼单砍价链接|cao
""",
        "members": [
            {
                "id": "tang",
                "name": "唐宇",
                "nick": "糖糖",
                "memories": """
nick|i|叫他糖糖，别叫全名
job|f|在一家游戏公司做后端开发，写 Go
wife|f|老婆叫王珊，在医院药剂科上班
wife.shift|f|老婆每周三、周六值班，晚上不在家
mil|f|岳母住在苏州，下个月过来住两周
mil.diet|f|岳母吃斋，初一十五不沾荤腥
mengyao|f|陈梦瑶是高中同学
classmate.job|f|高中同学现在在瑞金医院当皮肤科医生
reunion|f|高中同学聚会定在 8 月 2 日，在烟台
cat|f|家里有只英短蓝猫叫煤球
cat.food|f|猫最近换成了成猫粮，一天喂两次
game1|f|最近在肝《原神》的新版本
game2|f|Switch 上通关了《塞尔达：王国之泪》
game3|f|和同事周五晚上开黑打《CS2》
laptop|f|工作用 MacBook Pro，家里是自己组的台式机
phone|f|手机是 iPhone 13，电池不太行了
bike|f|骑一辆捷安特公路车上下班，单程 12 公里
rain|f|下雨天改坐地铁 10 号线
pollen|f|对花粉过敏，春天出门要戴口罩
music|f|最近单曲循环陈奕迅的《孤勇者》
music2|f|通勤路上听五月天的老歌
concert|f|买了 7 月 19 日周杰伦上海站的演唱会门票，两张
ramen|p|最爱吃日式豚骨拉面
coriander|p|不吃香菜
parents|f|爸妈在烟台开海鲜排档
dad.heart|f|爸爸有冠心病，不能太累
sister|f|妹妹唐婧在北京读大三
sister.intern|f|妹妹学交互设计，这个暑假想找个实习
""",
            },
            {
                "id": "song",
                "name": "宋雅琴",
                "nick": "宋姐",
                "memories": """
nick|i|叫她宋姐
detail|i|涉及钱的回答要写清楚数字和日期
job|f|在一家外贸公司做财务主管
kid1|f|大儿子叫轩轩，12 岁，上初一
kid2|f|小女儿叫甜甜，5 岁，在上幼儿园
kid1.exam|f|大儿子下周三期末考，数学最差
kid2.asthma|f|小女儿有哮喘，随身带沙丁胺醇喷雾
tutor|f|给大儿子请了数学家教李老师，每周六下午 2 点上课
tutor.fee|f|家教一次课 300 块，按月结
husband|f|老公叫老周，跑物流的，经常半夜才回家
dad|f|父亲今年 70 岁，在老家绍兴
dad.stroke|f|父亲前年中过风，右手不太灵活
brother|f|哥哥宋雅东在杭州开公司
debt|f|哥哥去年借了 5 万，说年底还
plant1|f|阳台养了一盆茉莉，今年开得特别好
plant2|f|客厅那盆发财树叶子发黄了
plant3|f|在试着用水培养绿萝
snack|p|喜欢吃话梅，办公室抽屉里常备
snack2|f|追剧时爱啃鸭脖
car|f|开一辆红色比亚迪宋 PLUS
car.ins|f|车险 7 月 20 日到期
show1|f|每晚追《玫瑰的故事》，刘亦菲太美了
show2|f|和女儿一起看《小猪佩奇》
dental|f|下周五下午约了牙医洗牙
back|f|腰椎间盘突出，久坐就疼
school|f|大儿子的学校是区实验中学，早上 7:20 到校
""",
            },
            {
                "id": "gao",
                "name": "高峰",
                "nick": "老高",
                "memories": """
nick|i|叫他老高
short|i|回答简短点，别超过五行
job|f|在国企做采购，朝九晚五
marathon|f|报名了 11 月的上海马拉松，目标跑进 3 小时 30 分
shoe.a|f|在比较跑鞋：亚瑟士 Novablast 5 打折后 699
shoe.b|f|另一双看的是耐克飞马 41，专柜 899
watch|f|用佳明 265 手表记录训练
pb|f|半马最好成绩 1 小时 38 分
achilles|f|左脚跟腱炎刚好，医生说别连续两天跑间歇
coach|f|跑团教练叫阿杰，每周二晚上带间歇训练
daughter|f|女儿叫高思彤，在武汉大学读大二
daughter.money|f|女儿每月生活费 2500，每月 1 号转
wife|f|老婆叫李红，在社区医院当护士
wife.night|f|老婆这个月上夜班多，白天补觉
wine|p|喜欢喝点黄酒，不喝啤酒
gout|f|尿酸偏高，医生让少喝酒少吃海鲜
dinner.turn|f|这个月轮到他订聚餐的餐厅
rest.a|f|看中一家杭帮菜馆外婆家，人均 90
rest.b|f|另一家潮汕牛肉火锅人均 120，要提前排队
car|f|开一辆 2016 年的本田雅阁，想明年换车
book1|f|在看村上春树的《当我谈跑步时我谈些什么》
book2|f|刚读完《人类简史》，挺颠覆认知
book3|f|重看了金庸的《笑傲江湖》
hometown|f|老家是湖北荆州，每年清明回去扫墓
mom|f|爸爸去年走了，妈妈一个人住在荆州
mom.call|f|每周日晚上给妈妈打视频电话
""",
            },
            {
                "id": "xunuo",
                "name": "许诺",
                "nick": "诺诺",
                "memories": """
nick|i|叫她诺诺
emoji|p|回复可以活泼点，加点表情
school|f|在同济读研二，专业是城市规划
advisor|f|导师是周教授，要求每周一交进度汇报
advisor.strict|f|导师很严，最讨厌学生迟到
paper|f|小论文投了《城市规划学刊》，在等审稿意见
thesis|f|毕业论文开题定在 9 月中旬
bf|f|男朋友叫林一帆，在南京读博
bf.bday|f|男朋友生日是 6 月 28 日，想送他机械键盘
game1|f|最近沉迷《明日方舟》，每天清体力
game2|f|和室友一起玩《双人成行》，快通关了
game3|f|Switch 上在玩《动物森友会》，岛评三星
anime1|f|在补《葬送的芙莉莲》，第二季还没出
anime2|f|重温了《进击的巨人》完结篇
snack1|f|最爱吃卫龙辣条
snack2|f|宿舍常备三只松鼠的夏威夷果
milktea|p|奶茶只喝霸王茶姬的伯牙绝弦，少糖
coffee|f|每天早上一杯美式续命
roommate|f|室友叫阿紫，是学建筑的
roommate.sleep|f|室友睡得早，11 点后宿舍要关灯
scholarship|f|拿了一等学业奖学金，8000 元
parttime|f|周二周四下午在一家事务所实习，日薪 200
allergy|f|对青霉素过敏
glasses|f|近视 500 度，平时戴隐形眼镜
hometown|f|老家在福建泉州
mom|f|妈妈在泉州开茶叶店
""",
            },
            {
                "id": "cao",
                "name": "曹文博",
                "nick": "博哥",
                "memories": """
nick|i|叫他博哥
noemoji|i|回复别用表情符号
job|f|在中山医院骨科当副主任医师
shift|f|每周二、周五全天门诊，周四上午手术
colleague1|f|同事老钱是麻醉科的，下班常一起运动
colleague2|f|科室新来的规培生叫韩雪，跟着他查房
trainee.note|f|规培生基础扎实，但缝合还不熟练
wife|f|爱人叫赵婷，是初中语文老师
wife.voice|f|爱人有慢性咽炎，讲课多了嗓子哑
son|f|儿子曹一鸣 16 岁，读高一
son.ankle|f|儿子在学校打篮球，上个月崴了脚踝
son.math|f|儿子物理和数学好，语文偏科
badminton|f|每周三晚上和同事在球馆打羽毛球
racket.a|f|看中一支尤尼克斯天斧 100ZZ，1580 元
racket.b|f|另一支李宁雷霆 80，1180 元
whisky|p|爱喝单一麦芽威士忌
liver|f|体检转氨酶偏高，戒酒三个月
fish|f|周末去淀山湖钓鱼
fish.gear|f|鱼竿是光威的，用了五年
car|f|开一辆黑色的沃尔沃 XC60
parking|f|医院车位紧张，早上 7 点前到才有位置
book1|f|在看《枪炮、病菌与钢铁》
book2|f|睡前翻《明朝那些事儿》
tea|p|喝龙井，不喝咖啡
mom|f|母亲住在隔壁小区，每天过来帮忙做饭
mom.sugar|f|母亲二型糖尿病，打胰岛素
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
shen|assoc|roommate,rent|小雨那份钱该转我多少
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
zhouxw|paraphrase|coffee,lactose|下午想点杯奶茶提提神，我能喝吗
zhouxw|set|piano,football|两个孩子这周各自有什么课外活动
zhouxw|category|yoga,swim|我平时都做些什么运动
peng|assoc|father,father.bp|回南通看老爷子，给他带点什么保健品合适
shen|assoc|mom,mom.sugar|给成都那边寄点零食，挑什么好
shen|category|podcast,podcast2|我平时都听哪些节目
shen|paraphrase|salary,rent|我这阵子手头紧不紧？想买个两千多的包
qiu|assoc|client,flight|拜访黄总那天闹钟该设几时
qiu|category|tea,drink2|我平时爱喝什么饮料
hemin|set|standup,pilates,aunt|我这周固定的安排有哪些
hemin|paraphrase|trip,aisle|下个月飞北京，帮我选个位子
tang|assoc,weak|mengyao,classmate.job|那名叫陈梦瑶的人是干什么的
tang|assoc|wife,wife.shift|王珊哪几天没空陪我
tang|assoc|sister,sister.intern|唐婧让我帮她内推，你看推哪个方向的岗位合适
tang|assoc|cat,cat.food|我出差那几日，煤球的伙食咋弄
tang|set|bike,rain|我上下班有几种走法，哪种更快
tang|set|pollen,dad.heart|家里人谁身体有毛病要注意的
tang|category|game1,game2,game3|我最近在玩什么游戏
tang|category|music,music2,concert|我平时喜欢哪些歌手
tang|category|laptop,phone|我手头有哪些数码产品？想换一个
tang|paraphrase|mil,mil.diet|丈母娘要来了，做饭要注意啥
tang|hub|concert,wife.shift|周杰伦演唱会门票两张，老婆周六值班去不了怎么办
song|assoc|brother,debt|雅东那笔钱啥时候能回来
song|assoc|kid2,kid2.asthma|甜甜能去爬山吗？这周末想去佘山
song|assoc|kid1,kid1.exam|轩轩最近成绩哪门拖后腿
song|assoc|tutor,tutor.fee|该给李老师转多少
song|set|kid1,kid2|我有几个孩子
song|set|kid2.asthma,dad.stroke|我家有几个人身体需要特别照顾
song|category|show1,show2|最近我在追什么剧
song|category|plant1,plant2,plant3|我那几盆植物最近怎么样
song|category|snack,snack2|我都馋哪些零嘴
song|paraphrase|car,car.ins|开车的那些保单啥时候要续
song|hub|kid1.exam,tutor|大儿子下周三期末考，周六的家教课要不要停一次
song|hub|kid2.asthma,kid2|小女儿的哮喘喷雾快用完了，周五去医院开
gao|assoc|daughter,daughter.money|思彤那边我该啥时候打款
gao|assoc|wife,wife.night|李红这周能陪我去看房吗
gao|assoc|coach,achilles|阿杰那边的课我这周还能上吗
gao|set|shoe.a,shoe.b|跑鞋哪双更便宜
gao|set|rest.a,rest.b,dinner.turn|聚餐那两家店哪家人均更低？这次该我订吧
gao|set|wife,daughter|我家里人都是干什么的
gao|category|book1,book2,book3|我最近读了什么书
gao|category|achilles,gout|我现在身上有啥毛病
gao|paraphrase|wine,gout|晚上聚餐，我喝点小酒没问题吧
gao|paraphrase|marathon,pb|我那个比赛想破 3 个半小时，现在差多少
gao|hub|daughter,daughter.money|女儿在武汉大学，每月生活费 1 号转，这个月能晚几天吗
xunuo|assoc|bf,bf.bday|林一帆的礼物还没买，帮我看看
xunuo|assoc|advisor,advisor.strict|周教授明天要见我，我得注意点啥
xunuo|assoc,chatty|roommate,roommate.sleep|今晚想跟阿紫在屋里开黑到半夜，会不会影响她😆
xunuo|set|paper,thesis|我手上有几件论文的事要跟
xunuo|set|scholarship,parttime|这学期我一共能拿到多少钱
xunuo|category|game1,game2,game3|我最近都在打哪些游戏
xunuo|category|anime1,anime2|我最近在看什么番
xunuo|category|snack1,snack2|我平时爱吃啥零食
xunuo|category|milktea,coffee|我平时爱喝些啥
xunuo|paraphrase|mom,hometown|我家里是做什么生意的
xunuo|hub|advisor,parttime|导师要求每周一交进度汇报，这周一我实习冲突吗
cao|assoc|colleague2,trainee.note|韩雪最近表现怎么样，我该重点教她点啥
cao|assoc|wife,wife.voice|给赵婷带点什么润喉的
cao|assoc|son,son.ankle|一鸣这周末有场比赛，我有点担心他
cao|assoc|son,son.math|一鸣想报个补习班，你看该补什么
cao|assoc,weak|colleague1,badminton|约老钱出来活动活动，哪天合适
cao|set|racket.a,racket.b|球拍哪支更便宜
cao|set|wife.voice,mom.sugar|家里人谁有慢性病
cao|category|book1,book2|我最近在看什么书
cao|category|whisky,tea|我平常爱什么饮品
cao|category|fish,badminton|我有什么爱好
cao|paraphrase|parking,car|我几点出门才能停上车
cao|paraphrase|liver,whisky|我现在能不能喝两杯
cao|hub|shift,badminton,son.ankle|周二全天门诊，周三晚上打羽毛球，这周能抽空陪儿子去看脚踝吗
"""

NEGATIVES = """
g5|zhouxw|早上好呀
g5|peng|收到
g5|shen|今天楼下咖啡店买一送一，冲啊
g5|qiu|哈哈哈哈哈
g5|hemin|Good morning~
g6|tang|早上好
g6|song|今天好热啊
g6|gao|哈哈哈笑死
g6|xunuo|晚安晚安
g6|cao|收到
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
        out = {
            "id": f"{owner}.{key}",
            "type": TYPES[t],
            "content": content,
            "created_at": created,
            "updated_at": updated,
        }
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
            members.append(
                {
                    "id": m["id"],
                    "name": m["name"],
                    "nick": m["nick"],
                    "memories": [memory(m["id"], x, False) for x in lines],
                }
            )
        lines = [x for x in g["memories"].strip().splitlines() if x.strip()]
        groups.append(
            {
                "id": g["id"],
                "name": g["name"],
                "platform": g["platform"],
                "memories": [memory(g["id"], x, True) for x in lines],
                "members": members,
            }
        )
    questions = []
    for i, line in enumerate(x for x in QUESTIONS.strip().splitlines() if x.strip()):
        speaker, tags, gold, text = line.split("|", 3)
        group = member_group[speaker]
        ids = [f"{group}.{k[2:]}" if k.startswith("g:") else f"{speaker}.{k}" for k in gold.split(",")]
        questions.append(
            {
                "id": f"a{i + 1:03d}",
                "group": group,
                "speaker": speaker,
                "text": text,
                "gold": ids,
                "tags": tags.split(","),
            }
        )
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
    out = [
        "{",
        f' "description": {dump(data["description"])},',
        f' "now": {data["now"]},',
        f' "now_iso": {dump(data["now_iso"])},',
        ' "groups": [',
    ]
    for gi, g in enumerate(data["groups"]):
        out.append(f'  {{"id": {dump(g["id"])}, "name": {dump(g["name"])}, "platform": {dump(g["platform"])},')
        out.append('   "memories": [')
        out += [f"    {dump(m)}" + ("," if i < len(g["memories"]) - 1 else "") for i, m in enumerate(g["memories"])]
        out.append("   ],")
        out.append('   "members": [')
        for mi, m in enumerate(g["members"]):
            out.append(
                f'    {{"id": {dump(m["id"])}, "name": {dump(m["name"])}, "nick": {dump(m["nick"])}, "memories": ['
            )
            out += [
                f"     {dump(x)}" + ("," if i < len(m["memories"]) - 1 else "") for i, x in enumerate(m["memories"])
            ]
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

"""A general Chinese lexicon of kinds of things people keep in a personal assistant's memory (issue 21, item 3).

Each kind (书, 电影, 游戏, 饮品, 运动, 孩子, 健康, 花销 …) has

* ``names``: how a message names the kind (我最近读了什么**书**, 平时爱**喝**什么, 家里人谁身体有**毛病**);
* ``cues``: words that make a memory one of the kind without naming it (辣条 → 零食, 瑜伽 → 运动, 女儿 → 孩子);
* ``title_cues``: words that, next to a title in 《》, say what the title is (**翻**《明朝那些事儿》 → 书,
  **追**《繁花》 → 剧, **通关**了《塞尔达》 → 游戏; 看 says nothing: it reads, watches and plays alike);
* ``pattern``: a shape instead of a word (an amount of money, a weekly time) for the kinds that have one.

The words are ordinary Chinese vocabulary for the kind (a dictionary's, not a data set's): the category words,
their common synonyms and the common items of the kind. A work whose kind nothing tells (重看了《笑傲江湖》) is
a generic `WORK`, which a question about any kind of work (`WORK_KINDS`) also reaches, after the works of its kind.

`WIDER` gives the kinds a kind is also part of (运动 is a 爱好, 过敏 is a matter of 健康); `SCOPE` kinds (家人,
花销) only narrow a question that names another kind (家里人谁有慢性病: the 健康 memories, the family's first).
`SET_FORMS` are the shapes of a question about a set (几个, 哪些, 什么, 哪个更, 一共, 多少, 分别 …).
Everything is matched on normalised text (NFKC + casefold), so English words are lower case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    names: frozenset[str]
    cues: frozenset[str] = frozenset()
    title_cues: frozenset[str] = frozenset()
    pattern: re.Pattern[str] | None = None


def _kind(names: str, cues: str = "", title_cues: str = "", pattern: str | None = None) -> Kind:
    return Kind(
        frozenset(names.split()),
        frozenset(cues.split()),
        frozenset(title_cues.split()),
        re.compile(pattern) if pattern else None,
    )


WORK = "作品"  # a title in 《》 that nothing else places

_SPORTS = """
运动 锻炼 健身 健身房 撸铁 力量训练 跑步 晨跑 夜跑 慢跑 长跑 马拉松 半马 全马 越野跑 游泳 游泳馆 泳池 蛙泳 自由泳
瑜伽 普拉提 羽毛球 篮球 足球 网球 乒乓球 排球 棒球 高尔夫 台球 保龄球 壁球 匹克球 飞盘 骑行 骑车 公路车 山地车
爬山 登山 徒步 滑雪 滑冰 溜冰 轮滑 滑板 攀岩 拳击 散打 跆拳道 空手道 柔道 击剑 跳绳 太极 太极拳 八段锦 广场舞
跳舞 舞蹈 街舞 冲浪 潜水 划船 皮划艇 桨板 球馆 打球 踢球 球队 健走 椭圆机 动感单车 hiit 跑鞋 球拍
"""

CATEGORIES: dict[str, Kind] = {
    # works: books, films, shows, animation, games, music, podcasts
    "书": _kind(
        "书 书籍 图书 小说 读物 看书 读书 阅读 绘本 漫画 书单 本书",
        "小说 读书 看书 书单 作家 这本书 一本书 那本书 新书 电子书 kindle 微信读书 读完 重读 在读 读了 绘本 漫画 散文 诗集",
        "读 翻 书 作者 著 本",
    ),
    "电影": _kind(
        "电影 影片 片子 大片 看片 电影院 院线",
        "电影 影院 电影院 影厅 上映 票房 院线 imax 首映 看片",
        "电影 影院 上映 特效 导演 票房 影片 片子",
    ),
    "剧": _kind(
        "剧 电视剧 美剧 韩剧 日剧 英剧 泰剧 国产剧 网剧 短剧 追剧 综艺 节目 连续剧",
        "追剧 刷剧 电视剧 美剧 韩剧 日剧 英剧 国产剧 网剧 短剧 综艺 连续剧",
        "追 刷 季 集 演得 主演 剧 综艺",
    ),
    "动漫": _kind(
        "番 番剧 新番 动漫 动画 二次元 漫画 追番 补番",
        "动漫 动画 番剧 新番 追番 补番 二次元 漫画",
        "番 动画 动漫",
    ),
    "游戏": _kind(
        "游戏 手游 端游 网游 单机 主机游戏 打游戏 玩游戏 电竞",
        "游戏 手游 端游 网游 通关 开黑 上分 排位 段位 氪金 steam switch ps5 ps4 xbox 电竞",
        "玩 打 肝 通关 开黑 上分 游戏",
    ),
    "音乐": _kind(
        "音乐 歌 歌曲 歌手 专辑 乐队 单曲 听歌 曲子 演唱会 唱片",
        "音乐 歌 歌曲 歌手 专辑 单曲 单曲循环 演唱会 音乐节 黑胶 唱片 乐队 livehouse 网易云 听歌 k歌 唱",
        "听 唱 歌 专辑 单曲 唱片",
    ),
    "播客": _kind(
        "播客 电台 节目 有声书 广播",
        "播客 电台 有声书 广播 一期 小宇宙 喜马拉雅",
        "播客 电台 期 节目",
    ),
    # pastimes
    "运动": _kind("运动 锻炼 健身 体育 球类 运动项目", _SPORTS, pattern=r"跑\s*\d|游\s*\d+\s*米"),
    "乐器": _kind(
        "乐器",
        "乐器 钢琴 吉他 小提琴 大提琴 古筝 二胡 琵琶 笛子 竹笛 长笛 尤克里里 架子鼓 萨克斯 口琴 电子琴 手风琴 贝斯 单簧管",
    ),
    "爱好": _kind(
        "爱好 兴趣 兴趣爱好 消遣 业余 休闲 娱乐 玩什么",
        "爱好 兴趣 钓鱼 摄影 拍照 书法 练字 画画 绘画 素描 水彩 手工 烘焙 烹饪 露营 旅游 旅行 自驾 收藏 集邮 下棋 围棋"
        " 象棋 国际象棋 桥牌 麻将 掼蛋 园艺 插花 手账 乐高 拼图 模型 手办 编织 十字绣 唱歌 k歌 剧本杀 密室 桌游 追星",
    ),
    # food and drink
    "饮品": _kind(
        "饮料 饮品 喝 酒水",
        "饮料 饮品 喝 茶 咖啡 拿铁 美式 摩卡 卡布奇诺 浓缩 奶茶 果茶 可乐 雪碧 汽水 气泡水 苏打水 矿泉水 酒 啤酒 精酿 红酒"
        " 葡萄酒 白酒 黄酒 米酒 威士忌 清酒 鸡尾酒 果汁 豆浆 牛奶 酸奶 椰汁 柠檬水 乌龙 绿茶 红茶 普洱 龙井 铁观音 白茶 花茶",
    ),
    "零食": _kind(
        "零食 零嘴 小吃 甜食 甜点 甜品 点心 嘴馋",
        "零食 零嘴 辣条 薯片 坚果 瓜子 花生 话梅 鸭脖 鸭架 鸡爪 凤爪 牛肉干 猪肉脯 巧克力 饼干 果冻 糖果 棒棒糖 蛋糕 冰淇淋"
        " 雪糕 蛋挞 面包 夏威夷果 腰果 开心果 杏仁 核桃 碧根果 山楂 海苔 锅巴 爆米花 虾条 卤味 甜点 甜品 布丁 马卡龙 辣条",
    ),
    "菜": _kind(
        "菜 菜系 美食 饭店 餐厅 馆子 饭馆 吃饭 好吃的 爱吃",
        "菜 菜系 美食 餐厅 饭店 饭馆 馆子 火锅 烧烤 川菜 粤菜 湘菜 鲁菜 东北菜 杭帮菜 本帮菜 西餐 日料 韩料 料理 寿司 拉面"
        " 面馆 饺子 包子 馄饨 小龙虾 烤鸭 牛排 披萨 汉堡 外卖 人均 自助 烤肉 麻辣烫 螺蛳粉 米线 炸鸡 早茶",
    ),
    # living things, things owned
    "宠物": _kind(
        "宠物 毛孩子 小动物 养了",
        "宠物 猫 狗 猫咪 狗狗 柯基 金毛 泰迪 柴犬 哈士奇 拉布拉多 边牧 比熊 博美 英短 美短 布偶 橘猫 狸花 暹罗 鹦鹉 兔子"
        " 仓鼠 乌龟 金鱼 龙猫 刺猬 猫粮 狗粮 铲屎 遛狗 猫砂",
    ),
    "植物": _kind(
        "植物 花草 绿植 盆栽 多肉 养花 几盆 那盆 这盆 盆花",
        "植物 花草 绿植 盆栽 多肉 绿萝 吊兰 发财树 龟背竹 君子兰 兰花 月季 茉莉 栀子 仙人掌 仙人球 芦荟 富贵竹 文竹 虎皮兰"
        " 琴叶榕 橡皮树 薄荷 绣球 菊花 蝴蝶兰 水培 浇水 施肥 开花 一盆 两盆 几盆",
    ),
    "数码": _kind(
        "数码 数码产品 电子产品 电子设备 设备 电器 家电 手机 电脑",
        "手机 电脑 笔记本 平板 ipad iphone macbook mac 台式机 主机 显示器 键盘 鼠标 耳机 airpods 相机 单反 微单 手表"
        " 手环 kindle switch 游戏机 路由器 充电宝 音箱 投影仪 电视 冰箱 洗衣机 空调 扫地机 电动牙刷",
    ),
    "车": _kind(
        "车 汽车 车子 座驾 买车 开车",
        "车 开车 汽车 suv 轿车 电车 油车 新能源 混动 大众 丰田 本田 日产 宝马 奔驰 奥迪 特斯拉 比亚迪 理想 蔚来 小鹏"
        " 问界 吉利 长安 保养 4s店 驾照",
    ),
    "衣物": _kind(
        "衣服 穿搭 鞋 鞋子 包包 衣物",
        "衣服 鞋 跑鞋 运动鞋 球鞋 皮鞋 靴子 外套 大衣 羽绒服 衬衫 t恤 卫衣 裙子 连衣裙 裤子 牛仔裤 西装 包包 帽子 围巾",
    ),
    # people
    "孩子": _kind(
        "孩子 小孩 娃 子女 儿女 小朋友 孩儿",
        "孩子 儿子 女儿 大儿子 小儿子 大女儿 小女儿 闺女 大宝 二宝 老大 老二 宝宝 小朋友 双胞胎",
    ),
    "家人": _kind(
        "家人 家里人 家属 亲人 全家 一家人 家里 我家 我们家 家庭",
        "家人 家里 儿子 女儿 孩子 闺女 老婆 老公 爱人 妻子 丈夫 媳妇 太太 先生 爸爸 妈妈 父亲 母亲 老爸 老妈 爸妈 父母 婆婆"
        " 公公 岳母 岳父 丈母娘 老丈人 奶奶 爷爷 外婆 外公 姥姥 姥爷 哥哥 弟弟 姐姐 妹妹",
    ),
    "职业": _kind(
        "职业 工作 干什么的 做什么的 干啥的 做啥的 上班 行业 单位",
        "工作 上班 职业 在读 读大 读研 读博 大学 读高 读初 上学 医生 护士 老师 教师 教授 律师 会计 工程师 程序员 设计师"
        " 经理 总监 销售 公务员 警察 司机 厨师 记者 编辑 研究员 公司 单位 银行 医院 创业 自由职业 退休",
        pattern=r"[当做]\w{0,6}(?:医生|护士|老师|工程师|设计师|律师|会计|经理|总监|销售|主管)",
    ),
    # health
    "过敏": _kind(
        "过敏 忌口 不能吃 碰不得 不耐受 禁忌 过敏原",
        "过敏 不耐受 忌口 不能吃 不能喝 碰不得 过敏原",
    ),
    "健康": _kind(
        "病 毛病 疾病 身体 健康 慢性病 病史 不舒服 症状 照顾",
        "病 炎 高血压 高血糖 血糖 糖尿病 血脂 尿酸 痛风 哮喘 心脏 冠心病 中风 脑梗 骨折 手术 近视 散光 失眠 胃 腰椎 颈椎"
        " 膝盖 疼 痛 吃药 药 打针 胰岛素 复查 住院 康复 体检 偏高 偏低 结节 抑郁 焦虑 医生说 医生让 过敏 不耐受",
    ),
    # time and money
    "日程": _kind(
        "安排 日程 行程 时间表 课表 固定 有空 空闲 找空 几点",
        "每天 每周 每晚 每早 每个周 每星期 周一 周二 周三 周四 周五 周六 周日 周末 例会 周会 站会 上课 课",
        pattern=r"每(?:天|日|周|星期|晚|早)|[早晚]上\s*\d+\s*点",
    ),
    "花销": _kind(
        "钱 多少钱 花费 开销 开支 支出 收入 工资 花销 费用 预算 价格 价钱 便宜 贵 划算 省钱 存款 理财 还款 花多少 拿到多少",
        "房租 租金 房贷 车贷 月供 工资 月薪 年薪 日薪 时薪 奖学金 补贴 定投 基金 理财 存款 预算 打折 落地 人均 年卡 月卡",
        pattern=r"\d[\d.,]*\s*(?:元|块|万|千|美元|刀|镑|欧)|[¥￥$]\s*\d|(?:价|每月|一晚|每晚|一个月|月付|年费|月费)\s*\d",
    ),
    "贷款": _kind(
        "贷款 还款 还贷 月供 欠款 分期 信用卡 账单",
        "房贷 车贷 贷款 月供 分期 花呗 白条 信用卡 账单 还款 还清",
    ),
    # the items of a comparison: 另一双看的是…, 也在考虑…, 在比较跑鞋 (a question comparing them: 哪双更便宜)
    "对比": _kind(
        "哪个更 哪家更 哪台更 哪双更 哪支更 哪款更 哪部更 哪辆更 哪张更 哪种更 哪个好 哪家好 更便宜 更划算 更贵 对比 相比",
        "在比较 在对比 也在考虑 还在考虑 在纠结 二选一",
        pattern=r"另一[个台双支家张款辆部间所本把位只件套]|[两几]个?[台双支家张款辆部间所本把套]都",
    ),
    "项目": _kind(
        "项目 project 交付 截止 deadline ddl 上线 交稿 到期",
        "项目 project 交付 截止 deadline ddl 上线 交稿 终稿 到期 验收 提交 结项 立项",
    ),
}

WORK_KINDS: frozenset[str] = frozenset({"书", "电影", "剧", "动漫", "游戏", "音乐", "播客"})
# The kinds a kind is also part of: a memory of the first is also one of the second.
WIDER: dict[str, frozenset[str]] = {
    "运动": frozenset({"爱好"}),
    "乐器": frozenset({"爱好"}),
    "过敏": frozenset({"健康"}),
    "贷款": frozenset({"花销"}),
    "孩子": frozenset({"家人"}),
    "动漫": frozenset({"剧"}),
}
# Kinds that narrow another kind named with them rather than stand for a set of their own: whose (家里人谁有慢性病)
# and what about them (健身房哪个更便宜: the gyms, those with a price first).
SCOPE: frozenset[str] = frozenset({"家人", "花销"})
# A one-character name or cue that is only the kind's inside none of these words (番茄 is no 番, 酒店 no 酒).
NOT_A_KIND: frozenset[str] = frozenset(
    "番茄 一番 番号 轮番 三番 番外 秘书 书记 证书 书包 书面 说明书 申请书 计划书 书桌 酒店 酒精 酒驾 火车 自行车 公交车"
    " 车站 车位 下车 上车 堵车 停车 打车 车间 病毒 毛病 贵州 贵阳 宝贵 喝彩 茶几 剧本 戏剧 剧烈 歌颂 课题"
    " 单车 心痛".split()
)

# The shape of a question about a set: how many, which (more / most), all of them, in total, compared, each.
SET_FORMS: tuple[str, ...] = tuple(
    "几个 几种 几件 几位 几盆 几台 几张 几只 几部 几本 几家 几样 几次 几门 几项 几双 几支 几首 几款 几辆 几套 几条"
    " 几口 哪些 哪个 哪家 哪台 哪支 哪双 哪种 哪几 哪款 哪部 哪本 哪首 哪位 哪天 什么 啥 都有 多少 一共 总共 加起来 合计 分别"
    " 各自 各有 比一比 对比 相比 更便宜 更贵 更快 更好 更划算 最先 最早 所有 全部 清单 列个 列一下 盘点 数数 谁".split()
)

"""The recall benchmark's fixed corpus (issue 39): facts about the owner and seven people
around them, in Chinese and English, with the queries that should find each.

Each slot is one kind of fact ("{p}'s cat is called {v}"), written in both languages,
with three ways to ask for it: ``lexical`` (the fact's own words), ``paraphrase`` (the
same language, other words: synonyms) and ``cross`` (the paraphrase in the other
language). A fact is written in one language (alternating); each (slot, person) fact
gets one query of each kind in turn. Changed facts: for some slots the owner's fact
changed, the old one is kept as a superseded fact and the query expects the new one.
Distractors share words or values with facts but answer no query.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# (English possessive, Chinese possessive, English paraphrase, Chinese paraphrase)
PEOPLE: list[tuple[str, str, str, str]] = [
    ("my", "我的", "my", "我"),
    ("my mother's", "我妈妈的", "mom's", "我母亲的"),
    ("my father's", "我爸爸的", "dad's", "我父亲的"),
    ("my wife's", "我老婆的", "my spouse's", "我妻子的"),
    ("my son's", "我儿子的", "my kid's", "我孩子的"),
    ("my boss's", "我老板的", "my manager's", "我领导的"),
    ("my sister's", "我姐姐的", "my sister's", "我姐的"),
    ("my colleague Wang's", "同事小王的", "my coworker Wang's", "同事小王的"),
]


@dataclass(frozen=True)
class Slot:
    fact_en: str
    fact_zh: str
    lexical_en: str
    lexical_zh: str
    para_en: str
    para_zh: str
    values: list[str]  # "english|中文" or one form for both
    changed: str = ""  # the owner's value before it changed ("" : never changed)


SLOTS: list[Slot] = [
    Slot(
        "{P} cat is called {v}.",
        "{Pz}猫叫{v}。",
        "What is {p} cat called?",
        "{pz}猫叫什么？",
        "What's the name of {q} pet?",
        "{qz}宠物名字是什么？",
        ["Mochi", "Tofu", "Luna", "Oreo", "Simba", "Doudou", "Nala", "Pudding"],
        "Biscuit",
    ),
    Slot(
        "{P} birthday is {v}.",
        "{Pz}生日是{v}。",
        "When is {p} birthday?",
        "{pz}生日是哪天？",
        "When was {q_subj} born?",
        "{qz_subj}哪天出生？",
        [
            "May 3|五月三日",
            "June 9|六月九日",
            "March 21|三月二十一日",
            "July 4|七月四日",
            "October 2|十月二日",
            "January 15|一月十五日",
            "August 8|八月八日",
            "December 12|十二月十二日",
        ],
    ),
    Slot(
        "{P} favourite dish is {v}.",
        "{Pz}最爱的菜是{v}。",
        "What is {p} favourite dish?",
        "{pz}最爱的菜是什么？",
        "What food does {q_subj} love eating?",
        "{qz_subj}喜欢吃什么？",
        [
            "mapo tofu|麻婆豆腐",
            "dumplings|饺子",
            "hotpot|火锅",
            "ramen|拉面",
            "roast duck|烤鸭",
            "sushi|寿司",
            "noodles|面条",
            "fried rice|炒饭",
        ],
        "pizza|披萨",
    ),
    Slot(
        "{P} home is in {v}.",
        "{Pz}家在{v}。",
        "Where is {p} home?",
        "{pz}家在哪里？",
        "Which city does {q_subj} live in?",
        "{qz_subj}住在哪个城市？",
        [
            "Shanghai|上海",
            "Hangzhou|杭州",
            "Chengdu|成都",
            "Beijing|北京",
            "Shenzhen|深圳",
            "Nanjing|南京",
            "Berlin|柏林",
            "Wuhan|武汉",
        ],
        "Suzhou|苏州",
    ),
    Slot(
        "{P} employer is {v}.",
        "{Pz}工作单位是{v}。",
        "Who is {p} employer?",
        "{pz}工作单位是哪？",
        "Which company does {q_subj} work for?",
        "{qz_subj}在哪个公司上班？",
        [
            "a bank|一家银行",
            "a hospital|一家医院",
            "Tencent|腾讯",
            "a school|一所学校",
            "Huawei|华为",
            "a law firm|一家律所",
            "a bakery|一家面包店",
            "a startup|一家创业公司",
        ],
        "a newspaper|一家报社",
    ),
    Slot(
        "{P} allergy is {v}.",
        "{Pz}过敏原是{v}。",
        "What is {p} allergy?",
        "{pz}过敏原是什么？",
        "Is {q_subj} allergic to anything?",
        "{qz_subj}对什么过敏？",
        [
            "peanuts|花生",
            "shrimp|虾",
            "pollen|花粉",
            "penicillin|青霉素",
            "milk|牛奶",
            "cat hair|猫毛",
            "mango|芒果",
            "eggs|鸡蛋",
        ],
    ),
    Slot(
        "{P} car is a {v}.",
        "{Pz}车是{v}。",
        "What car is {p} car?",
        "{pz}车是什么？",
        "What does {q_subj} drive?",
        "{qz_subj}开什么汽车？",
        [
            "blue Toyota|蓝色丰田",
            "BYD Han|比亚迪汉",
            "Tesla Model 3|特斯拉Model 3",
            "red Honda|红色本田",
            "Volkswagen Golf|大众高尔夫",
            "Nio ES6|蔚来ES6",
            "white Mazda|白色马自达",
            "Ford Focus|福特福克斯",
        ],
        "grey Nissan|灰色日产",
    ),
    Slot(
        "{P} phone is a {v}.",
        "{Pz}手机是{v}。",
        "Which phone is {p} phone?",
        "{pz}手机是什么？",
        "What mobile does {q_subj} use?",
        "{qz_subj}用什么电话？",
        [
            "Pixel 9",
            "iPhone 16",
            "Xiaomi 15|小米15",
            "Huawei Mate|华为Mate",
            "Oppo Find",
            "Galaxy S24",
            "Vivo X100",
            "iPhone 13",
        ],
        "iPhone 12",
    ),
    Slot(
        "{P} hobby is {v}.",
        "{Pz}爱好是{v}。",
        "What is {p} hobby?",
        "{pz}爱好是什么？",
        "What does {q_subj} do in free time?",
        "{qz_subj}业余时间做什么消遣？",
        [
            "photography|摄影",
            "knitting|织毛衣",
            "fishing|钓鱼",
            "calligraphy|书法",
            "chess|下棋",
            "pottery|陶艺",
            "hiking|徒步",
            "origami|折纸",
        ],
    ),
    Slot(
        "{P} favourite sport is {v}.",
        "{Pz}最喜欢的运动是{v}。",
        "What is {p} favourite sport?",
        "{pz}最喜欢的运动是什么？",
        "What exercise does {q_subj} enjoy?",
        "{qz_subj}爱好哪种锻炼？",
        [
            "badminton|羽毛球",
            "swimming|游泳",
            "tennis|网球",
            "basketball|篮球",
            "table tennis|乒乓球",
            "yoga|瑜伽",
            "running|跑步",
            "football|足球",
        ],
    ),
    Slot(
        "{P} favourite band is {v}.",
        "{Pz}最喜欢的乐队是{v}。",
        "What is {p} favourite band?",
        "{pz}最喜欢的乐队是谁？",
        "What music does {q_subj} listen to?",
        "{qz_subj}爱听谁的歌？",
        [
            "Coldplay",
            "Mayday|五月天",
            "Queen",
            "Beyond",
            "Radiohead",
            "Sodagreen|苏打绿",
            "ABBA",
            "Oasis",
        ],
    ),
    Slot(
        "{P} favourite novel is {v}.",
        "{Pz}最喜欢的小说是{v}。",
        "What is {p} favourite novel?",
        "{pz}最喜欢的小说是哪本？",
        "Which book does {q_subj} love reading?",
        "{qz_subj}爱读哪本书？",
        [
            "The Three-Body Problem|三体",
            "Dream of the Red Chamber|红楼梦",
            "1984",
            "To Live|活着",
            "Dune|沙丘",
            "Fortress Besieged|围城",
            "Norwegian Wood|挪威的森林",
            "Jane Eyre|简爱",
        ],
    ),
    Slot(
        "{P} usual drink is {v}.",
        "{Pz}常喝的饮料是{v}。",
        "What is {p} usual drink?",
        "{pz}常喝的饮料是什么？",
        "What does {q_subj} like to drink?",
        "{qz_subj}爱喝什么？",
        [
            "green tea|绿茶",
            "black coffee|黑咖啡",
            "oolong|乌龙茶",
            "latte|拿铁",
            "soy milk|豆浆",
            "lemonade|柠檬水",
            "jasmine tea|茉莉花茶",
            "hot chocolate|热可可",
        ],
        "cola|可乐",
    ),
    Slot(
        "{P} university was {v}.",
        "{Pz}大学是{v}。",
        "Which university was {p} university?",
        "{pz}大学是哪所？",
        "Where did {q_subj} study at college?",
        "{qz_subj}在哪毕业？",
        [
            "Fudan|复旦",
            "Tsinghua|清华",
            "Zhejiang University|浙大",
            "Peking University|北大",
            "Wuhan University|武大",
            "Nankai|南开",
            "Sun Yat-sen University|中山大学",
            "Xiamen University|厦大",
        ],
    ),
    Slot(
        "{P} second language is {v}.",
        "{Pz}第二语言是{v}。",
        "What is {p} second language?",
        "{pz}第二语言是什么？",
        "Which language is {q_subj} learning?",
        "{qz_subj}在学哪种语言？",
        [
            "Spanish|西班牙语",
            "Japanese|日语",
            "French|法语",
            "German|德语",
            "Korean|韩语",
            "Italian|意大利语",
            "Russian|俄语",
            "Arabic|阿拉伯语",
        ],
    ),
    Slot(
        "{P} favourite colour is {v}.",
        "{Pz}最喜欢的颜色是{v}。",
        "What is {p} favourite colour?",
        "{pz}最喜欢的颜色是什么？",
        "Which color does {q_subj} like best?",
        "{qz_subj}偏爱什么色？",
        [
            "green|绿色",
            "navy blue|藏青",
            "red|红色",
            "purple|紫色",
            "yellow|黄色",
            "black|黑色",
            "orange|橙色",
            "pink|粉色",
        ],
    ),
    Slot(
        "{P} dentist is {v}.",
        "{Pz}牙医是{v}。",
        "Who is {p} dentist?",
        "{pz}牙医是谁？",
        "Which doctor does {q_subj} see for teeth?",
        "{qz_subj}看牙找哪个医生？",
        [
            "Dr. Lee|李医生",
            "Dr. Chen|陈医生",
            "Dr. Wu|吴医生",
            "Dr. Zhao|赵医生",
            "Dr. Sun|孙医生",
            "Dr. Zhou|周医生",
            "Dr. Xu|徐医生",
            "Dr. Ma|马医生",
        ],
        "Dr. Gao|高医生",
    ),
    Slot(
        "{P} daily medication is {v}.",
        "{Pz}每日用药是{v}。",
        "What is {p} daily medication?",
        "{pz}每日用药是什么？",
        "Which pills does {q_subj} take?",
        "{qz_subj}服用什么药？",
        [
            "vitamin D|维生素D",
            "metformin|二甲双胍",
            "aspirin|阿司匹林",
            "fish oil|鱼油",
            "iron tablets|铁片",
            "calcium|钙片",
            "melatonin|褪黑素",
            "folic acid|叶酸",
        ],
    ),
    Slot(
        "{P} wake-up time is {v}.",
        "{Pz}起床时间是{v}。",
        "What is {p} wake-up time?",
        "{pz}起床时间是几点？",
        "When does {q_subj} get up in the morning?",
        "{qz_subj}早上几点醒？",
        [
            "6:30|六点半",
            "7:00|七点",
            "5:45|五点四十五",
            "8:15|八点一刻",
            "6:00|六点",
            "7:30|七点半",
            "9:00|九点",
            "5:30|五点半",
        ],
        "8:00|八点",
    ),
    Slot(
        "{P} bedtime is {v}.",
        "{Pz}就寝时间是{v}。",
        "What is {p} bedtime?",
        "{pz}就寝时间是几点？",
        "When does {q_subj} go to sleep at night?",
        "{qz_subj}晚上几点睡觉？",
        [
            "23:00|十一点",
            "22:30|十点半",
            "midnight|半夜十二点",
            "21:30|九点半",
            "22:00|十点",
            "00:30|十二点半",
            "23:30|十一点半",
            "21:00|九点",
        ],
    ),
    Slot(
        "{P} wedding anniversary is {v}.",
        "{Pz}结婚纪念日是{v}。",
        "When is {p} wedding anniversary?",
        "{pz}结婚纪念日是哪天？",
        "What date did {q_subj} get married?",
        "{qz_subj}哪天结的婚？",
        [
            "April 20|四月二十日",
            "September 9|九月九日",
            "May 20|五月二十日",
            "November 11|十一月十一日",
            "February 14|二月十四日",
            "June 1|六月一日",
            "October 10|十月十日",
            "March 8|三月八日",
        ],
    ),
    Slot(
        "{P} shoe size is {v}.",
        "{Pz}鞋码是{v}。",
        "What is {p} shoe size?",
        "{pz}鞋码是多少？",
        "What size shoes does {q_subj} wear?",
        "{qz_subj}穿多大的鞋？",
        ["42", "37", "43", "38", "36", "44", "39", "41"],
        "40",
    ),
    Slot(
        "{P} blood type is {v}.",
        "{Pz}血型是{v}。",
        "What is {p} blood type?",
        "{pz}血型是什么？",
        "Which blood group is {q_subj}?",
        "{qz_subj}是什么血？",
        ["A+", "O-", "B+", "AB+", "O+", "A-", "B-", "AB-"],
    ),
    Slot(
        "{P} favourite film is {v}.",
        "{Pz}最喜欢的电影是{v}。",
        "What is {p} favourite film?",
        "{pz}最喜欢的电影是哪部？",
        "Which movie does {q_subj} love watching?",
        "{qz_subj}爱看哪部影片？",
        [
            "Spirited Away|千与千寻",
            "Farewell My Concubine|霸王别姬",
            "Inception|盗梦空间",
            "Titanic|泰坦尼克号",
            "In the Mood for Love|花样年华",
            "Up|飞屋环游记",
            "Amelie|天使爱美丽",
            "Interstellar|星际穿越",
        ],
    ),
    Slot(
        "{P} favourite game is {v}.",
        "{Pz}最喜欢的游戏是{v}。",
        "What is {p} favourite game?",
        "{pz}最喜欢的游戏是什么？",
        "What does {q_subj} play on the console?",
        "{qz_subj}爱打什么电玩？",
        [
            "Zelda|塞尔达",
            "Minecraft|我的世界",
            "Tetris|俄罗斯方块",
            "Genshin|原神",
            "Stardew Valley|星露谷",
            "Mario Kart|马里奥赛车",
            "FIFA",
            "Civilization|文明",
        ],
    ),
    Slot(
        "{P} biggest fear is {v}.",
        "{Pz}最大的恐惧是{v}。",
        "What is {p} biggest fear?",
        "{pz}最大的恐惧是什么？",
        "What is {q_subj} afraid of?",
        "{qz_subj}害怕什么？",
        [
            "heights|恐高",
            "spiders|蜘蛛",
            "deep water|深水",
            "the dark|黑暗",
            "snakes|蛇",
            "flying|坐飞机",
            "crowds|人群",
            "dogs|狗",
        ],
    ),
    Slot(
        "{P} commute is by {v}.",
        "{Pz}通勤方式是{v}。",
        "How is {p} commute?",
        "{pz}通勤方式是什么？",
        "How does {q_subj} get to the office?",
        "{qz_subj}怎么去上班？",
        [
            "subway|地铁",
            "bus|公交",
            "bike|自行车",
            "car|开车",
            "ferry|轮渡",
            "walking|步行",
            "scooter|电动车",
            "train|火车",
        ],
        "taxi|出租车",
    ),
    Slot(
        "{P} diet is {v}.",
        "{Pz}饮食是{v}。",
        "What is {p} diet?",
        "{pz}饮食是怎样的？",
        "Does {q_subj} eat meat?",
        "{qz_subj}吃肉吗？",
        [
            "vegetarian|素食",
            "low-carb|低碳水",
            "halal|清真",
            "vegan|纯素",
            "gluten-free|无麸质",
            "low-salt|低盐",
            "pescatarian|只吃鱼素",
            "keto|生酮",
        ],
    ),
    Slot(
        "{P} gym is {v}.",
        "{Pz}健身房是{v}。",
        "Which gym is {p} gym?",
        "{pz}健身房是哪家？",
        "Where does {q_subj} work out?",
        "{qz_subj}去哪锻炼？",
        [
            "Anytime Fitness",
            "Pure Fitness",
            "Gold's Gym",
            "Will's|威尔士",
            "Super Monkey|超级猩猩",
            "Life Time",
            "Crunch",
            "Equinox",
        ],
        "Planet Fitness",
    ),
    Slot(
        "{P} dream trip is {v}.",
        "{Pz}梦想之旅是{v}。",
        "What is {p} dream trip?",
        "{pz}梦想之旅是哪里？",
        "Where does {q_subj} want to go on vacation?",
        "{qz_subj}想去哪旅游？",
        [
            "Iceland|冰岛",
            "Kyoto|京都",
            "Patagonia|巴塔哥尼亚",
            "Tibet|西藏",
            "Norway|挪威",
            "Peru|秘鲁",
            "Morocco|摩洛哥",
            "New Zealand|新西兰",
        ],
    ),
    Slot(
        "{P} bank is {v}.",
        "{Pz}开户行是{v}。",
        "Which bank is {p} bank?",
        "{pz}开户行是哪家？",
        "Where does {q_subj} keep an account?",
        "{qz_subj}的账户在哪家银行？",
        [
            "ICBC|工商银行",
            "China Merchants Bank|招商银行",
            "HSBC|汇丰",
            "Bank of China|中国银行",
            "CCB|建设银行",
            "Citibank|花旗",
            "Ping An|平安银行",
            "DBS|星展银行",
        ],
    ),
    Slot(
        "{P} favourite flower is {v}.",
        "{Pz}最喜欢的花是{v}。",
        "What is {p} favourite flower?",
        "{pz}最喜欢的花是什么？",
        "Which plant does {q_subj} grow in the garden?",
        "{qz_subj}养什么植物？",
        [
            "orchids|兰花",
            "roses|玫瑰",
            "peonies|牡丹",
            "lilies|百合",
            "tulips|郁金香",
            "jasmine|茉莉",
            "sunflowers|向日葵",
            "lotus|荷花",
        ],
    ),
]

DISTRACTORS: list[str] = [
    "Mochi is a Japanese rice cake made from glutinous rice.",
    "麻婆豆腐是一道四川名菜。",
    "The Toyota factory tour is on the company calendar.",
    "Python 3.13 removed some old modules.",
    "The bank holiday moves the rubbish collection to Tuesday.",
    "上海的地铁十号线周末延长运营。",
    "The phone bill arrives on the fifth of each month.",
    "The dentist's office sends reminders by SMS.",
    "Green is the colour of the recycling bin.",
    "周五下午三点有团队周会。",
    "The novel club meets in the library on Thursdays.",
    "A tennis court can be booked a week ahead.",
    "超市的牛奶周三打折。",
    "The shoe shop on Main Street closes at nine.",
    "Coldplay tickets go on sale next Friday.",
    "The film festival opens in October.",
    "The subway map was updated last month.",
    "花园里的玫瑰需要每周浇水两次。",
    "The hospital car park charges by the hour.",
    "Tofu is made from soybeans.",
    "The train to Hangzhou takes about an hour.",
    "Vitamin D is made in the skin in sunlight.",
    "Our router restarts every night at three.",
    "The password manager needs an update.",
    "明天有雨，记得带伞。",
    "The library returns are due on the 15th.",
    "The yoga studio changed its timetable.",
    "Dumplings are traditional at the Spring Festival.",
    "The coffee machine at work is broken again.",
    "Luna means moon in Latin.",
    "周末的羽毛球馆需要提前预约。",
    "The school run starts at half past seven.",
    "Iceland has more sheep than people.",
    "The pharmacy is open until ten.",
    "Chess clubs meet in the community centre.",
    "公司年会定在一月二十日。",
    "The cinema gives discounts on Tuesdays.",
    "Gluten is a protein found in wheat.",
    "The ferry timetable changes in winter.",
    "新的健身房在公司楼下开业了。",
]


@dataclass
class Fact:
    id: int
    text: str
    language: str
    superseded: bool = False
    replaces: int | None = None  # the id of the fact this one changes (saved before it)


@dataclass
class Query:
    text: str
    kind: str  # lexical, paraphrase, cross
    expected: int  # the fact id


@dataclass
class Corpus:
    facts: list[Fact] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)


def _value(value: str, language: str) -> str:
    en, _, zh = value.partition("|")
    return zh if language == "zh" and zh else en


def _fill(template: str, person: tuple[str, str, str, str], value: str) -> str:
    en, zh, q_en, q_zh = person
    subject_en = "I" if en == "my" else en.removesuffix("'s")
    subject_q = "I" if q_en == "my" else q_en.removesuffix("'s")
    text = template.format(
        P=en[:1].upper() + en[1:],
        Pz=zh,
        p=en,
        pz=zh,
        q=q_en,
        qz=q_zh,
        q_subj=subject_q if "{q_subj}" in template else subject_en,
        qz_subj=q_zh.removesuffix("的"),
        v=value,
    )
    text = text.replace("does I ", "do I ").replace("is I ", "am I ").replace("was I ", "was I ")
    return text[:1].upper() + text[1:]


def build(slots: int = len(SLOTS), people: int = len(PEOPLE), distractors: int = 40) -> Corpus:
    """The corpus: ``slots`` × ``people`` facts (plus changed and distractor facts) and
    one query per (slot, person) fact, its kind in turn."""
    corpus = Corpus()
    kinds = ("lexical", "paraphrase", "cross")
    for s, slot in enumerate(SLOTS[:slots]):
        for p, person in enumerate(PEOPLE[:people]):
            language = "en" if (s + p) % 2 == 0 else "zh"
            template = slot.fact_en if language == "en" else slot.fact_zh
            replaces = None
            if p == 0 and slot.changed:
                old = _fill(template, person, _value(slot.changed, language))
                replaces = len(corpus.facts) + 1
                corpus.facts.append(Fact(replaces, old, language, superseded=True))
            text = _fill(template, person, _value(slot.values[p], language))
            fact = Fact(len(corpus.facts) + 1, text, language, replaces=replaces)
            corpus.facts.append(fact)
            kind = kinds[(s + p) % 3]
            other = "zh" if language == "en" else "en"
            asked = {"lexical": language, "paraphrase": language, "cross": other}[kind]
            name = "lexical" if kind == "lexical" else "para"
            template = getattr(slot, f"{name}_{asked}")
            corpus.queries.append(Query(_fill(template, person, ""), kind, fact.id))
    for text in DISTRACTORS[:distractors]:
        language = "en" if text.isascii() else "zh"
        corpus.facts.append(Fact(len(corpus.facts) + 1, text, language))
    return corpus

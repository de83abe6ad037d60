"""A deterministic local embedder (issue 39), shared by the embeddings simulator
(``tests/sim/embeddings_sim.py``) and the recall benchmark (``bench/recall.py``), so both
run offline and give the same vectors every time.

A text's vector is the weighted sum of its features' directions (each a dense ±1
vector drawn from the feature's hash, so vectors are dense as a real model's): ASCII words and
their character trigrams, Chinese character unigrams and bigrams, and one feature per
*concept* of :data:`CONCEPTS` the text mentions in either language ("cat", "猫" and
"宠物" are all the concept ``pet``), weighted above the rest: paraphrases and
translations share their concepts, so they land near each other, as a real model's do.
It is a stand-in for a model, not one: figures measured with it say how the fusion
behaves, not how good a real model is (bench/README.md)."""

from __future__ import annotations

import functools
import hashlib
import math
import re

DIMENSIONS = 256
CONCEPT_WEIGHT = 3.0
_WORD = re.compile(r"[a-z0-9]+")
_HAN = re.compile(r"[\u4e00-\u9fff]+")
_FUNCTION_WORDS = "a an and are at be did do does for from has have how i in is it its me my of on \
or s that the this to was what which who with"
_FUNCTION = frozenset(_FUNCTION_WORDS.split())
_FUNCTION_HAN = frozenset("的了是在我你吗呢吧啊么什怎")

# concept: the words (English, whole words) and phrases (Chinese, substrings) naming it,
# comma-separated.
_TABLE = {
    "pet": "cat,cats,kitten,pet,pets,dog,puppy,猫,宠物,狗,猫咪",
    "name": "called,name,named,names,叫,名字,称呼",
    "birthday": "birthday,born,birth,生日,出生",
    "food": "food,dish,eat,eating,meal,cuisine,吃,菜,食物,美食",
    "like": "favorite,favourite,like,likes,love,loves,enjoy,enjoys,fond,喜欢,爱,最爱,偏爱",
    "dislike": "hate,hates,dislike,dislikes,can't stand,讨厌,不喜欢,受不了",
    "live": "live,lives,living,home,reside,resides,moved,住,家,居住,搬",
    "city": "city,town,城市,市",
    "work": "work,works,job,employer,company,office,career,工作,上班,公司,职业,单位",
    "allergy": "allergic,allergy,allergies,react,过敏",
    "car": "car,drive,drives,vehicle,automobile,车,开车,汽车,座驾",
    "phone": "phone,mobile,smartphone,cellphone,手机,电话",
    "hobby": "hobby,hobbies,pastime,free time,weekend,爱好,业余,周末,消遣",
    "sport": "sport,sports,exercise,workout,play,plays,运动,锻炼,打",
    "music": "music,band,song,songs,singer,listen,音乐,歌,乐队,听",
    "book": "book,books,novel,read,reading,author,书,小说,读,看书",
    "drink": "drink,drinks,coffee,tea,beverage,喝,饮料,咖啡,茶",
    "school": "school,university,college,studied,graduated,study,学校,大学,毕业,读书",
    "language": "language,languages,speak,speaks,learning,语言,说,学",
    "color": "color,colour,颜色,色",
    "travel": "travel,trip,vacation,holiday,visit,visited,旅行,旅游,去过,度假,之旅",
    "doctor": "doctor,dentist,physician,clinic,医生,牙医,诊所,看病",
    "medicine": "medicine,medication,pill,pills,takes,药,吃药,服用",
    "wake": "wake,wakes,up,morning,get up,起床,早上,醒",
    "sleep": "sleep,bed,bedtime,night,睡觉,睡,晚上,就寝",
    "password": "password,wifi,network,密码,网络",
    "anniversary": "anniversary,wedding,married,纪念日,结婚,婚",
    "mother": "mother,mom,mum,妈妈,母亲,老妈",
    "father": "father,dad,papa,爸爸,父亲,老爸",
    "wife": "wife,spouse,partner,老婆,妻子,爱人",
    "son": "son,boy,kid,child,儿子,孩子",
    "boss": "boss,manager,supervisor,老板,领导,上司",
    "sister": "sister,姐姐,妹妹,姐",
    "colleague": "colleague,coworker,co-worker,同事",
    "shoe": "shoe,shoes,size,鞋,码,尺码",
    "blood": "blood,type,血型,血",
    "plant": "plant,plants,garden,flower,flowers,植物,的花,花园,养花",
    "movie": "movie,movies,film,films,watch,cinema,电影,看片,影片",
    "game": "game,games,gaming,video,游戏,打游戏,电玩,console",
    "fear": "afraid,fear,scared,phobia,怕,害怕,恐惧",
    "number": "number,号码,号",
    "bank": "bank,account,银行,账户,开户",
    "gym": "gym,fitness,健身,健身房,work out,去哪锻炼",
    "diet": "vegetarian,vegan,diet,meat,素食,吃素,肉,饮食",
    "commute": "commute,subway,metro,bus,bike,通勤,地铁,公交,骑车,去上班,get to the office,怎么去",
}
CONCEPTS: dict[str, tuple[str, ...]] = {k: tuple(v.split(",")) for k, v in _TABLE.items()}


def embed(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """``text``'s unit vector (all zeros for a text with no feature)."""
    vector = [0.0] * dimensions
    for feature, weight in features(text):
        for i, sign in enumerate(_direction(feature, dimensions)):
            vector[i] += sign * weight
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


@functools.lru_cache(maxsize=65536)
def _direction(feature: str, dimensions: int) -> tuple[int, ...]:
    """The feature's own direction: ±1 in every dimension, from its hash (dense, as a
    real model's vectors are; random directions are nearly orthogonal)."""
    raw = b"".join(
        hashlib.blake2b(f"{n}:{feature}".encode(), digest_size=64).digest()
        for n in range((dimensions + 511) // 512)
    )
    bits = int.from_bytes(raw, "little")
    return tuple(1 if bits >> i & 1 else -1 for i in range(dimensions))


def features(text: str) -> list[tuple[str, float]]:
    lowered = text.lower()
    found: list[tuple[str, float]] = []
    words = _WORD.findall(lowered)
    for word in words:
        if word in _FUNCTION:
            continue
        found.append(("w:" + word, 1.0))
        padded = f"^{word}$"
        found.extend(("t:" + padded[i : i + 3], 0.3) for i in range(len(padded) - 2))
    for run in _HAN.findall(lowered):
        found.extend(("c:" + ch, 0.4) for ch in run if ch not in _FUNCTION_HAN)
        found.extend(("b:" + run[i : i + 2], 1.0) for i in range(len(run) - 1))
    bag = set(words)
    for concept, names in CONCEPTS.items():
        if any(_mentions(lowered, bag, name) for name in names):
            found.append(("k:" + concept, CONCEPT_WEIGHT))
    return found


def _mentions(lowered: str, bag: set[str], name: str) -> bool:
    if name.isascii():
        return name in bag if " " not in name else name in lowered
    return name in lowered


def tokens_of(texts: list[str]) -> int:
    """What the simulator reports as ``usage.prompt_tokens``: about a token per four
    characters, at least one per text."""
    return sum(len(text) // 4 + 1 for text in texts)

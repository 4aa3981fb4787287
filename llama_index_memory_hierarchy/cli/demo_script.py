"""What ``lmh demo`` says, in English and Chinese: the two sessions, the remembered facts, the questions, the documents.

Kept apart from the runner (:mod:`.demo`) so the script can be read and translated as one text.
"""

from __future__ import annotations

from dataclasses import dataclass

DEMO_USER = "zhang_san"
SYSTEM_PROMPT = "You are a friendly Python tutor with long-term memory. Answer in one or two short sentences."

SESSION_1 = [
    "Hi! I'm Zhang San. I'm learning Python and I already know the basic syntax.",
    "I work at Acme as a data analyst. My manager Li Si asked me to automate our weekly Excel sales report.",
]
#: What a function-calling LLM would store with the remember tool after session 1's turns.
REMEMBER = [
    ("Zhang San is learning Python and already knows the basic syntax.", 0.8),
    ("Zhang San works at Acme as a data analyst.", 0.8),
    ("Zhang San wants to automate the weekly Excel sales report.", 0.8),
    ("Li Si is the manager of Zhang San.", 0.6),
]
SESSION_2 = "Do you remember what I'm learning and what I want to automate?"
RECALL_QUERY = "Who is Zhang San's manager?"
KB_QUESTION = "When is the weekly sales report due, and how can I automate it with Python?"

DOCUMENTS = {
    "excel-automation.md": """# Automating Excel reports with Python

## Reading the workbook
Load the sales export with `pandas.read_excel("sales.xlsx", sheet_name="Orders")`. pandas uses
openpyxl to read .xlsx files, so install both: `pip install pandas openpyxl`.

## Building the weekly report
Group the orders by region with `df.groupby("region")["amount"].sum()` and write the totals to a
new sheet with `DataFrame.to_excel`. openpyxl can then add a chart and bold the header row.

## Running it every week
Put the steps in a script, `weekly_report.py`, and schedule it: a cron entry such as
`0 8 * * MON python weekly_report.py` on Linux or macOS, or Task Scheduler on Windows.
""",
    "acme-reporting-policy.md": """# Acme reporting policy

## Weekly sales report
The weekly sales report is due every Monday at 10:00. It lists the sales totals per region and
the top ten customers, and is saved to the shared folder `reports/sales/` as an Excel workbook.

## Review
Li Si, head of the sales team, reviews the report before the Monday meeting. Corrections are due
by Tuesday noon.
""",
    "python-learning-path.md": """# A Python learning path

## After the basic syntax
Learn functions, modules and virtual environments, then the standard library: `pathlib`,
`datetime` and `csv`.

## Data work
Move on to pandas for tables and matplotlib for charts. Automating a real report from your own
job is the best exercise.
""",
}


@dataclass(frozen=True)
class DemoScript:
    """What the demo says, in one language: the two sessions, the remembered facts, the questions, the documents."""

    system_prompt: str
    session_1: list[str]
    remember: list[tuple[str, float]]
    session_2: str
    recall_query: str
    kb_question: str
    documents: dict[str, str]
    entity: str  # whose graph neighbourhood is shown
    recalled: tuple[str, ...]  # words of session 1 that an answer in session 2 should use
    caption: str


ZH_DOCUMENTS = {
    "excel-automation.md": """# 用Python自动化Excel报表

## 读取工作簿
用 `pandas.read_excel("sales.xlsx", sheet_name="Orders")` 读取销售导出数据。pandas 通过 openpyxl
读取 .xlsx 文件，所以两者都要安装：`pip install pandas openpyxl`。

## 生成周报
用 `df.groupby("region")["amount"].sum()` 按地区汇总订单，再用 `DataFrame.to_excel` 写入新的工作表。

## 每周自动运行
把这些步骤写进脚本 `weekly_report.py`，再定时运行：Linux 或 macOS 上用 cron，例如
`0 8 * * MON python weekly_report.py`，Windows 上用任务计划程序。
""",
    "acme-reporting-policy.md": """# Acme公司报表制度

## 每周销售报表
每周销售报表在每周一上午10点前提交，列出各地区的销售总额和前十名客户，
以Excel工作簿保存在共享文件夹 `reports/sales/`。

## 审核
销售部经理李四在周一例会前审核报表，修改意见在周二中午前提交。
""",
    "python-learning-path.md": """# Python学习路线

## 掌握基础语法之后
学习函数、模块和虚拟环境，然后是标准库：`pathlib`、`datetime` 和 `csv`。

## 数据处理
接着学习用 pandas 处理表格、用 matplotlib 画图。把自己工作中的真实报表自动化是最好的练习。
""",
}

SCRIPTS = {
    "en": DemoScript(
        system_prompt=SYSTEM_PROMPT,
        session_1=SESSION_1,
        remember=REMEMBER,
        session_2=SESSION_2,
        recall_query=RECALL_QUERY,
        kb_question=KB_QUESTION,
        documents=DOCUMENTS,
        entity="Zhang San",
        recalled=("Python", "Excel", "report", "Acme", "Li Si"),
        caption="Whiteboard sketch of the weekly sales report pipeline: Excel export -> Python script -> report",
    ),
    "zh": DemoScript(
        system_prompt="你是一位有长期记忆、友好的Python导师。用一两句简短的话回答。",
        session_1=[
            "你好！我叫张三，正在学习Python，已经掌握了基础语法。",
            "我在Acme公司做数据分析师。我的经理李四让我把每周的Excel销售报表自动化。",
        ],
        remember=[
            ("张三正在学习Python，已经掌握了基础语法。", 0.8),
            ("张三在Acme公司做数据分析师。", 0.8),
            ("张三想把每周的Excel销售报表自动化。", 0.8),
            ("李四是张三的经理。", 0.6),
        ],
        session_2="你还记得我的学习进度吗？",
        recall_query="张三的经理是谁？",
        kb_question="每周销售报表什么时候交？怎样用Python自动化？",
        documents=ZH_DOCUMENTS,
        entity="张三",
        recalled=("Python", "基础语法", "Excel", "报表", "Acme", "李四"),
        caption="白板草图：每周销售报表流程，Excel导出 -> Python脚本 -> 报表",
    ),
}


__all__ = ["DEMO_USER", "SCRIPTS", "DemoScript"]

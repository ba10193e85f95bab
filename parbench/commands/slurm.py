"""placeholder, replaced below"""
def add_parser(sub):
    pass

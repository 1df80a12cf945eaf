class Article:
    def __init__(self, title, tags=[]):
        self.title = title
        self.tags = tags

    def tag(self, *names):
        for name in names:
            if name not in self.tags:
                self.tags.append(name)
        return self
